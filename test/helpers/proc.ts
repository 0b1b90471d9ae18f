import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { ExecutionContext } from 'ava';
import { BIN } from './cli.js';

export interface Proc {
  child: ChildProcess;
  lines: string[];
  /** Resolves with the first line (seen so far or later) matching `re`. */
  waitFor(re: RegExp, ms?: number): Promise<string>;
  stop(): Promise<void>;
}

/** Starts the built `anet` binary as a long-running process, stopped when the test ends. */
export function startBin(t: ExecutionContext, args: string[]): Proc {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const waiters: { re: RegExp; resolve: (l: string) => void }[] = [];
  const onLine = (line: string) => {
    lines.push(line);
    for (const w of [...waiters]) if (w.re.test(line)) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(line);
    }
  };
  createInterface({ input: child.stdout! }).on('line', onLine);
  createInterface({ input: child.stderr! }).on('line', onLine);
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const proc: Proc = {
    child,
    lines,
    waitFor: (re, ms = 15_000) =>
      new Promise((resolve, reject) => {
        const seen = lines.find((l) => re.test(l));
        if (seen) return resolve(seen);
        const timer = setTimeout(() => reject(new Error(`timed out waiting for ${re} from anet ${args.join(' ')}; output:\n${lines.join('\n')}`)), ms);
        waiters.push({ re, resolve: (l) => (clearTimeout(timer), resolve(l)) });
      }),
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
  t.teardown(() => proc.stop());
  return proc;
}
