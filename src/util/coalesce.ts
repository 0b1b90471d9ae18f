// A value that is a current status, not a piece of output (a progress preview): passed on at most once
// per `gapMs`, and of the values that came within a gap only the last one goes.

export interface Coalescer<T> {
  push(value: T): void;
  /** Nothing more goes: a value still waiting is dropped (what ended the stream supersedes it). */
  close(): void;
  /** Nothing more goes after a value still waiting, which goes now. */
  end(): void;
}

/** Calls `emit` at most once per `gapMs` (measured on `now`), with the last value pushed. */
export function coalescer<T>(gapMs: number, now: () => number, emit: (value: T) => void): Coalescer<T> {
  let lastAt = -Infinity;
  let pending: { value: T } | null = null;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  const send = (value: T) => {
    lastAt = now();
    emit(value);
  };
  const flush = () => {
    timer = undefined;
    if (closed || !pending) return;
    const { value } = pending;
    pending = null;
    send(value);
  };
  return {
    push(value) {
      if (closed) return;
      const wait = lastAt + gapMs - now();
      if (wait <= 0 && !timer) return send(value);
      pending = { value };
      timer ??= setTimeout(flush, Math.max(0, wait));
    },
    close() {
      closed = true;
      pending = null;
      clearTimeout(timer);
    },
    end() {
      clearTimeout(timer);
      flush();
      closed = true;
    },
  };
}
