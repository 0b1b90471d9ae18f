// Request bodies of the local A2A endpoint (SPEC §12), parsed losslessly: a capability's arguments reach the
// service with every digit the client wrote. lossless-json is plain JS and slow on long strings (~4 s for a
// 30 MiB file part on a small machine, most of it building the string one character at a time), so such a
// body parsed on the event loop held up every other request to the endpoint, and the node, that long.
// A body over INLINE_MAX is therefore parsed by the same parser in a worker thread, one body at a time (as
// on the event loop, at most one large body's parse is in memory), and comes back as a flat tape (below),
// rebuilt here into the value an inline parse gives: the same objects, keys in the same order, each number
// a LosslessNumber with the digits as written. A long string costs the event loop a slice; every value
// rebuilt costs it ~0.25 µs, so a body of millions of small values (about a second for 4 million numbers,
// as long as parsing them in line) still holds it up.
import { Worker } from 'node:worker_threads';
import { parse as parseLossless, LosslessNumber } from 'lossless-json';

/** Bodies up to this size are parsed in line (a few ms at most); a worker costs ~35 ms to start. */
export const INLINE_MAX = 64 * 1024;

/** The request a body holds, or not JSON (ok: false), whatever the parser's reason. */
export type Parsed = { ok: true; value: unknown } | { ok: false };

/**
 * The worker's stack is the main thread's (V8's default 984 KiB; Node keeps 192 KiB of a worker's stack
 * for itself), so a body nested too deeply for an inline parse is not JSON in the worker either, and what
 * the worker parses, the code after it (stringifying the arguments, say) can walk as before. (Measured: the
 * worker takes 3,940 nested objects, an inline parse 4,101, less below a deeper call stack.)
 */
const STACK_MB = (984 + 192) / 1024;

/**
 * The tape the worker posts: the value in pre-order, one entry per value or object key, each a kind and a
 * size (a container's member count; the length of a string, a key or a number's digits, all of which are
 * concatenated, in order, in `text`). Flat, so posting it costs no stack however deep the value (structured
 * clone recurses, and failed on bodies the parser takes), and three objects to post whatever the body (a
 * posted array of a string per value costs ~0.25 µs a value to receive); a number can be nothing else.
 */
enum Kind {
  String = 0,
  Number = 1,
  Key = 2,
  Object = 3,
  Array = 4,
  True = 5,
  False = 6,
  Null = 7,
}

/**
 * The worker (plain JS, evaluated: the same in the built code and under tsx). It parses one body with the
 * lossless-json module the endpoint itself loads and posts `{ok: false}` or the tape.
 */
const WORKER = `
const { parentPort, workerData: { lossless, bytes } } = require('node:worker_threads');
class Key { constructor(name) { this.name = name; } }
(async () => {
  const { parse, isLosslessNumber } = await import(lossless);
  let value;
  try {
    value = parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'));
  } catch {
    parentPort.postMessage({ ok: false });
    return;
  }
  const kinds = [];
  const sizes = [];
  const parts = [];
  const put = (kind, s) => { kinds.push(kind); sizes.push(s.length); parts.push(s); };
  const stack = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') put(${Kind.String}, v);
    else if (v instanceof Key) put(${Kind.Key}, v.name);
    else if (isLosslessNumber(v)) put(${Kind.Number}, v.value);
    else if (v === true || v === false || v === null) { kinds.push(v === true ? ${Kind.True} : v === false ? ${Kind.False} : ${Kind.Null}); sizes.push(0); }
    else if (Array.isArray(v)) {
      kinds.push(${Kind.Array}); sizes.push(v.length);
      for (let i = v.length - 1; i >= 0; i--) stack.push(v[i]);
    } else {
      const keys = Object.keys(v);
      kinds.push(${Kind.Object}); sizes.push(keys.length);
      for (let i = keys.length - 1; i >= 0; i--) stack.push(v[keys[i]], new Key(keys[i]));
    }
  }
  const tape = { ok: true, kinds: Uint8Array.from(kinds), sizes: Uint32Array.from(sizes), text: parts.join('') };
  parentPort.postMessage(tape, [tape.kinds.buffer, tape.sizes.buffer]);
})();
`;

type Reply = { ok: false } | { ok: true; kinds: Uint8Array; sizes: Uint32Array; text: string };

const LOSSLESS_URL = import.meta.resolve('lossless-json');

/** A body as an inline parse reads it. */
export function parseInline(body: Buffer): Parsed {
  try {
    return { ok: true, value: parseLossless(body.toString('utf8')) };
  } catch {
    return { ok: false };
  }
}

/** Parses request bodies: small ones in line, large ones in a worker thread, one after another. */
export class BodyParser {
  /** Settles once the last large body's worker has exited (its heap gone): the next one starts then. */
  private queue: Promise<void> = Promise.resolve();
  private readonly running = new Set<Worker>();
  private closed = false;

  parse(body: Buffer): Promise<Parsed> {
    if (body.length <= INLINE_MAX) return Promise.resolve(parseInline(body));
    const job = this.queue.then(() => this.inWorker(body));
    this.queue = job.then(
      (j) => j.exited,
      () => undefined,
    );
    return job.then((j) => j.parsed);
  }

  /** Stops the workers: their parses, and those waiting, fail (the connections are closed anyway). */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.running].map((w) => w.terminate()));
  }

  private inWorker(body: Buffer): { parsed: Promise<Parsed>; exited: Promise<void> } {
    if (this.closed) throw new Error('the local A2A endpoint is closing');
    // Moved to the worker, not copied, when the body has memory of its own (a large concatenated body has).
    const bytes = body.byteOffset === 0 && body.byteLength === body.buffer.byteLength ? body : Buffer.from(body);
    const worker = new Worker(WORKER, {
      eval: true,
      workerData: { lossless: LOSSLESS_URL, bytes },
      transferList: [bytes.buffer as ArrayBuffer],
      execArgv: [],
      resourceLimits: { stackSizeMb: STACK_MB },
    });
    this.running.add(worker);
    const exited = new Promise<void>((done) =>
      worker.once('exit', () => {
        this.running.delete(worker);
        done();
      }),
    );
    const parsed = new Promise<Parsed>((resolve, reject) => {
      worker.once('message', (m: Reply) => {
        resolve(m.ok ? { ok: true, value: rebuild(m) } : m);
        void worker.terminate();
      });
      // Out of memory, say, or terminated by close(): no answer from this body.
      worker.once('error', reject);
      worker.once('exit', (code) => reject(new Error(`the request body could not be parsed (its parse worker stopped, code ${code})`)));
    });
    return { parsed, exited };
  }
}

/** The value a tape holds (iteratively: depth costs no stack). */
function rebuild({ kinds, sizes, text }: { kinds: Uint8Array; sizes: Uint32Array; text: string }): unknown {
  let root: unknown;
  let at = 0; // where the next string starts in `text`
  // The containers being filled, innermost last: how many values each still takes, and the key of the next.
  const open: { into: Record<string, unknown> | unknown[]; left: number; key: string }[] = [];
  for (let i = 0; i < kinds.length; i++) {
    const kind = kinds[i] as Kind;
    const size = sizes[i]!;
    let v: unknown;
    if (kind === Kind.String || kind === Kind.Number || kind === Kind.Key) {
      const s = text.slice(at, at + size);
      at += size;
      if (kind === Kind.Key) {
        open[open.length - 1]!.key = s;
        continue;
      }
      v = kind === Kind.Number ? new LosslessNumber(s) : s;
    } else {
      v = kind === Kind.Object ? {} : kind === Kind.Array ? [] : kind === Kind.True ? true : kind === Kind.False ? false : null;
    }
    const parent = open[open.length - 1];
    if (!parent) root = v;
    else {
      if (Array.isArray(parent.into)) parent.into.push(v);
      // `__proto__` is an own key of a parsed object: defined, as the parser does, not set as the prototype.
      else if (parent.key === '__proto__')
        Object.defineProperty(parent.into, parent.key, { value: v, writable: true, enumerable: true, configurable: true });
      else parent.into[parent.key] = v;
      parent.left--;
    }
    if ((kind === Kind.Object || kind === Kind.Array) && size > 0)
      open.push({ into: v as Record<string, unknown> | unknown[], left: size, key: '' });
    while (open.length > 0 && open[open.length - 1]!.left === 0) open.pop();
  }
  return root;
}
