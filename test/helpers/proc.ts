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
    for (const w of [...waiters])
      if (w.re.test(line)) {
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
        const timer = setTimeout(
          () => reject(new Error(`timed out waiting for ${re} from anet ${args.join(' ')}; output:\n${lines.join('\n')}`)),
          ms,
        );
        waiters.push({
          re,
          resolve: (l) => {
            clearTimeout(timer);
            resolve(l);
          },
        });
      }),
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
  t.teardown(() => proc.stop());
  return proc;
}

/**
 * Starts `anet daemon` as a child process, crashing at `crashAt` (ANET_CRASH_AT, src/payment/crash.ts)
 * if given, and waits until its relay stream is open; killed when the test ends.
 */
export async function childDaemon(
  t: ExecutionContext,
  dir: string,
  crashAt?: string,
): Promise<{ child: ChildProcess; exited: Promise<number | null>; log: string[] }> {
  const child = spawn(process.execPath, [BIN, 'daemon', '--data', dir], {
    env: { ...process.env, ANET_CRASH_AT: crashAt ?? '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.teardown(() => void child.kill('SIGKILL'));
  const log: string[] = [];
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code, signal) => resolve(signal ? -1 : code)));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the daemon did not open its relay stream in 60 s:\n${log.join('')}`)), 60_000);
    const take = (chunk: Buffer) => {
      log.push(chunk.toString());
      if (log.join('').includes('relay stream open')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', take);
    child.stderr!.on('data', take);
  });
  return { child, exited, log };
}
