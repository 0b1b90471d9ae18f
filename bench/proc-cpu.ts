// CPU time from Linux /proc, for the benches that run their parts as processes of their own.
import { readFileSync } from 'node:fs';

/**
 * User + system CPU time so far (ms) of `/proc/<pid>` or `/proc/<pid>/task/<tid>` — all threads of a
 * process, or one of them — or null where there is none (the process is gone, or not Linux).
 */
export function cpuMsAt(path: string): number | null {
  const t = cpuTimesAt(path);
  return t && t.user + t.system;
}

/**
 * User and system CPU time so far (ms), apart (the system part is the kernel's work for the process:
 * syscalls, copies, page faults), and the minor page faults so far (pages touched for the first time).
 */
export function cpuTimesAt(path: string): { user: number; system: number; faults: number } | null {
  try {
    const fields = readFileSync(`${path}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return { user: Number(fields[11]) * 10, system: Number(fields[12]) * 10, faults: Number(fields[7]) };
  } catch {
    return null;
  }
}
