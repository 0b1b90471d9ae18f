// Writing with backpressure to an HTTP request or response.
import type { Readable, Writable } from 'node:stream';

/** Resolves when `w` can take more, or has closed (a write to it then ends the loop that waits). */
export function drainedOrClosed(w: Writable): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      w.off('drain', done);
      w.off('close', done);
      resolve();
    };
    w.once('drain', done);
    w.once('close', done);
  });
}

/** Resolves once `s` has closed (at once when it is destroyed already). */
export function closed(s: Readable | Writable): Promise<void> {
  return new Promise((resolve) => (s.destroyed ? resolve() : s.once('close', () => resolve())));
}

/**
 * `p`'s value, or undefined once `s` closes first (at once when it is destroyed already). Not a
 * Promise.race with a promise of the close made once per stream: each race leaves a reaction on that
 * promise, holding what the race settled with until the stream closes — in a loop over a blob's pieces,
 * every piece it waited for (measured: a hub held an upload's 64 MiB that way).
 */
export function unlessClosed<T>(p: Promise<T>, s: Readable | Writable): Promise<T | undefined> {
  if (s.destroyed) {
    // Nobody waits on `p` then: its failure must not go unhandled (it would end the process).
    p.catch(() => {});
    return Promise.resolve(undefined);
  }
  return new Promise((resolve, reject) => {
    const onClose = () => resolve(undefined);
    s.once('close', onClose);
    p.then(
      (value) => {
        s.off('close', onClose);
        resolve(value);
      },
      (err: unknown) => {
        s.off('close', onClose);
        reject(err);
      },
    );
  });
}

/**
 * The most a live stream of updates (SSE, NDJSON) may hold unread for a client before the client is cut
 * off: a client that stopped reading must not make the daemon buffer for it without end. The task goes on.
 * Well above the largest single update (a result of up to 1 MiB of JSON, as an event), so a client that
 * reads at once is never cut off by an update it has not had time to read: just after a write, that
 * write is still counted as unread.
 */
export const MAX_UNREAD_BYTES = 4 * 1024 * 1024;

/** Writes one update of a live stream; a client with MAX_UNREAD_BYTES unread already is disconnected instead. */
export function writeUpdate(w: Writable, chunk: string): void {
  if (w.destroyed) return;
  if (w.writableLength > MAX_UNREAD_BYTES) {
    w.destroy(new Error('the client reads the stream too slowly'));
    return;
  }
  w.write(chunk);
}

const corked = new WeakSet<Writable>();

/**
 * Writes made to `w` in this turn of the event loop leave together, in one write (one syscall, not one
 * each): corked until setImmediate. For streams of small frames written by many tasks at once.
 */
export function corkForTurn(w: Writable): void {
  if (corked.has(w)) return;
  corked.add(w);
  w.cork();
  setImmediate(() => {
    corked.delete(w);
    w.uncork();
  });
}
