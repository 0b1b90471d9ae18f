// Writing with backpressure to an HTTP request or response.
import type { Writable } from 'node:stream';

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
