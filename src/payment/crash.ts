// Crash points for the payment crash tests (SPEC §10: "retries after a crash at any step never charge
// twice"). A test runs a daemon as a child process with ANET_CRASH_AT=<point>; the process then dies at
// that point with SIGKILL — no cleanup, no flush — exactly as a power cut or an OOM kill would leave it.
export type CrashPoint = 'after-hold' | 'after-capture' | 'after-authorize';

export function crashPoint(point: CrashPoint): void {
  if (process.env.ANET_CRASH_AT === point) process.kill(process.pid, 'SIGKILL');
}
