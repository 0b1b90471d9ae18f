import type { Clock } from '../../src/runtime/clock.js';

/** The system clock plus an offset the test can move forward; timers notice a jump within 100 ms. */
export class OffsetClock implements Clock {
  offset = 0;

  now(): number {
    return Date.now() + this.offset;
  }

  advance(ms: number): void {
    this.offset += ms;
  }

  at(at: number, fn: () => void): { cancel(): void } {
    let handle: NodeJS.Timeout;
    const arm = () => {
      const delay = at - this.now();
      if (delay <= 0) return fn();
      handle = setTimeout(arm, Math.min(delay, 100));
      handle.unref?.();
    };
    arm();
    return { cancel: () => clearTimeout(handle) };
  }
}
