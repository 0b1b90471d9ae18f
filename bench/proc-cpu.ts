// CPU time from Linux /proc, for the benches that run their parts as processes of their own.
import { readFileSync } from 'node:fs';

/**
 * User + system CPU time so far (ms) of `/proc/<pid>` or `/proc/<pid>/task/<tid>` — all threads of a
 * process, or one of them — or null where there is none (the process is gone, or not Linux).
 */
export function cpuMsAt(path: string): number | null {
  try {
    const fields = readFileSync(`${path}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return null;
  }
}
