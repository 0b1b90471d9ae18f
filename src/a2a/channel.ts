// A queue of one stream's events: the task's updates push into it as they come, the SSE response reads
// them in order. The reader may go (the client dropped the connection): what is pushed after is dropped,
// since the task goes on without it (A2A §3.5.2: a task's life does not depend on a stream's).

export class Channel<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private ended = false;
  private failure: Error | null = null;
  private wake: (() => void) | null = null;
  private closed = false;

  push(item: T): void {
    if (this.ended || this.closed) return;
    this.items.push(item);
    this.poke();
  }

  /** No more items; the reader stops once it has the ones queued (with `failure`, after throwing it). */
  end(failure?: Error): void {
    if (this.ended) return;
    this.ended = true;
    this.failure = failure ?? null;
    this.poke();
  }

  /** The reader has gone: a read waiting for the next item returns, and later pushes are dropped. */
  stop(): void {
    this.closed = true;
    this.end();
  }

  private poke(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    try {
      for (;;) {
        const item = this.items.shift();
        if (item !== undefined) {
          yield item;
          continue;
        }
        if (this.ended) {
          if (this.failure) throw this.failure;
          return;
        }
        await new Promise<void>((resolve) => {
          this.wake = resolve;
        });
      }
    } finally {
      // The reader left (or finished): later pushes go nowhere.
      this.closed = true;
      this.items.length = 0;
    }
  }
}
