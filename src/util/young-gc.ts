// A young-generation collection after every so many bytes read from sockets, for a process whose own
// JavaScript allocates little per byte it moves (the hub storing blobs).
//
// Why: each socket read gives a new 64 KiB ArrayBuffer, whose bytes live outside V8's heap. V8 collects the
// young generation when the heap's own objects fill it (or when buffers V8 itself allocated pass ~32 MiB;
// Node's socket reads are not counted there), and the hub makes few objects per upload, so these buffers
// stayed unreachable but uncollected until their bytes, counted as external memory, pushed V8 past its
// old-generation limit: then it ran a full mark-compact of the whole heap. Measured on the hub in
// bench/files: 40-55 mark-compacts during 8 x 64 MiB, each ~10 ms on the main thread plus concurrent
// marking, and 3.5-4.4 s of hub CPU; with a young collection every 8 MiB, 2-6 mark-compacts and 2.4-2.8 s.
// A young collection of this heap takes about half a millisecond: the buffers it frees are dead already.
//
// V8 gives no other handle on this: its `gc` function exists only while the flag is set, and then only in
// contexts made after that, hence the new context below. The flag is cleared again at once, so no context
// or worker made later gets a `gc` global (the main one never has one); setting it does make Node reject
// its built-in code cache for the built-in modules loaded afterwards, a one-time cost, taken only once a
// process has read its first 8 MiB.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

type GcFunction = (options: { type: 'minor'; execution: 'sync' }) => void;

let collect: GcFunction | null | undefined;

/** V8's collector, the young generation only; null where it cannot be had (then nothing is collected early). */
function youngCollector(): GcFunction | null {
  if (collect !== undefined) return collect;
  try {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as unknown;
    setFlagsFromString('--no-expose-gc');
    collect = typeof gc === 'function' ? (gc as GcFunction) : null;
  } catch {
    collect = null;
  }
  return collect;
}

/**
 * A counter of bytes read: once `every` bytes have been noted since the last time, the young generation is
 * collected (synchronously, in the caller's turn), by `gc` when given, else by V8's collector, fetched the
 * first time. Returns how many collections it ran, for tests.
 */
export function youngGcEvery(every: number, gc?: GcFunction | null): { note(bytes: number): void; readonly runs: number } {
  let since = 0;
  let runs = 0;
  return {
    note(bytes) {
      since += bytes;
      if (since < every) return;
      since = 0;
      const collector = gc === undefined ? youngCollector() : gc;
      if (!collector) return;
      runs++;
      collector({ type: 'minor', execution: 'sync' });
    },
    get runs() {
      return runs;
    },
  };
}
