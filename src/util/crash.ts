// Crash points for the crash tests (SPEC §10: "retries after a crash at any step never charge twice";
// SPEC §9, §13: no task is lost for good). A test runs a daemon as a child process with
// ANET_CRASH_AT=<point>; the process then dies at that point with SIGKILL — no cleanup, no flush — exactly
// as a power cut or an OOM kill would leave it. `after-deliver`: a task.send taken from the relay, before
// anything is journaled; `after-completed`: a call's COMPLETED is durable, its answer not yet sent.
export type CrashPoint = 'after-hold' | 'after-capture' | 'after-authorize' | 'after-deliver' | 'after-completed';

export function crashPoint(point: CrashPoint): void {
  if (process.env.ANET_CRASH_AT === point) process.kill(process.pid, 'SIGKILL');
}
