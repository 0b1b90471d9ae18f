// Time for the runtime, injectable so tests drive it. Machines never read a clock: the host stamps events.
export interface Clock {
  now(): number;
  /** Calls `fn` once the clock reaches `at` (or at once when `at` has passed). */
  at(at: number, fn: () => void): { cancel(): void };
}

/** Node timers hold at most 2^31−1 ms; a longer delay fires at once. */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1;
const MAX_TIMEOUT = MAX_TIMEOUT_MS;

export const systemClock: Clock = {
  now: () => Date.now(),
  at(at, fn) {
    let handle: NodeJS.Timeout;
    const arm = () => {
      const delay = at - Date.now();
      // setTimeout overflows past ~24.8 days: wait in chunks.
      handle = setTimeout(delay > MAX_TIMEOUT ? arm : fn, Math.max(0, Math.min(delay, MAX_TIMEOUT)));
      handle.unref?.();
    };
    arm();
    return { cancel: () => clearTimeout(handle) };
  },
};

/** A clock that moves only when told to; due timers fire in time order during `advance`. */
export class ManualClock implements Clock {
  private timers: { at: number; fn: () => void; id: number }[] = [];
  private ids = 0;
  constructor(private time = 0) {}

  now(): number {
    return this.time;
  }

  at(at: number, fn: () => void) {
    const id = ++this.ids;
    this.timers.push({ at, fn, id });
    this.timers.sort((a, b) => a.at - b.at || a.id - b.id);
    if (at <= this.time) queueMicrotask(() => this.fireDue());
    return {
      cancel: () => {
        this.timers = this.timers.filter((t) => t.id !== id);
      },
    };
  }

  /**
   * Moves time forward to `to`, firing each due timer with the clock set to its own time, and awaiting
   * `quiet` (e.g. the host becoming idle) after each, since a fired timer may arm the next.
   */
  async advanceTo(to: number, quiet: () => Promise<void> = () => settle()): Promise<void> {
    for (;;) {
      const next = this.timers[0];
      if (!next || next.at > to) break;
      this.time = Math.max(this.time, next.at);
      this.timers.shift();
      next.fn();
      await quiet();
    }
    this.time = Math.max(this.time, to);
  }

  advance(ms: number, quiet?: () => Promise<void>): Promise<void> {
    return this.advanceTo(this.time + ms, quiet);
  }

  private fireDue(): void {
    while (this.timers[0] && this.timers[0].at <= this.time) this.timers.shift()!.fn();
  }
}

/** Lets pending promise chains (and LevelDB callbacks) run. */
export async function settle(rounds = 5): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((r) => setImmediate(r));
}
