// A file's encryption for the hub (PROTOCOL §6.8, issue 20): the STREAM construction (Hoang, Reyhanitabar,
// Rogaway, Vizár 2015; the one age and Tink use) over ChaCha20-Poly1305. The plaintext is
// cut in chunks of `chunk` bytes; chunk i is sealed under the file's own fresh key with the nonce
// `i as 11 big-endian bytes ‖ last`, where `last` is 1 for the final chunk and 0 for every other. So each
// chunk is authenticated on its own (a download is checked chunk by chunk, never held whole), chunks cannot
// be reordered (the counter), and a ciphertext cut after a whole chunk is detected (no chunk before the
// last one opens as the last). A key is used for one file only, so the nonce needs no random part.
//
// ChaCha20-Poly1305 from libsodium (src/util/sodium.ts), one chunk at a time into buffers reused from
// chunk to chunk: node:crypto gives each update a new buffer, and the fresh pages cost a new process
// (every `anet call`) more than the cipher. A chunk is gathered in one buffer only when the reads do not
// line up with it (a file is read a chunk at a time, so they do); the sealed or opened bytes given out are
// views of one buffer, good until the next is asked for (`reuse`), or new buffers.
import { createHash, randomBytes } from 'node:crypto';
import { giveBuffer, takeBuffer } from '../util/buffers.js';
import { chachaOpen, chachaSeal } from '../util/sodium.js';

export const TAG_BYTES = 16;
export const KEY_BYTES = 32;
/** The chunk size a node seals with: 1 MiB of plaintext, 1 MiB + 16 bytes sealed. */
export const DEFAULT_CHUNK = 1 << 20;
/**
 * The chunk sizes a receiver accepts: powers of two from 64 KiB to 1 MiB. At most 1 MiB because a provider
 * reads a whole first chunk of each file (to learn its type) before the call is admitted.
 */
export const MIN_CHUNK = 1 << 16;
export const MAX_CHUNK = 1 << 20;

export class BlobDamagedError extends Error {
  override name = 'BlobDamagedError';
}

export const newBlobKey = (): Buffer => randomBytes(KEY_BYTES);

export function isChunkSize(n: unknown): n is number {
  return typeof n === 'number' && Number.isInteger(n) && n >= MIN_CHUNK && n <= MAX_CHUNK && (n & (n - 1)) === 0;
}

/** How many chunks a file of `size` bytes is sealed in (an empty file is one empty final chunk). */
export const chunkCount = (size: number, chunk: number): number => Math.max(1, Math.ceil(size / chunk));

/** The sealed length of a file of `size` bytes. */
export const sealedSize = (size: number, chunk: number): number => size + TAG_BYTES * chunkCount(size, chunk);

function nonce(index: number, last: boolean): Buffer {
  const n = Buffer.alloc(12);
  // 11 bytes of counter: a 64 MiB file has at most 1024 chunks, so the high bytes stay zero.
  n.writeUIntBE(index, 5, 6);
  n[11] = last ? 1 : 0;
  return n;
}

/** How a seal or an open gives out its bytes. */
export interface ChunkOptions {
  /**
   * Each buffer given out is a view of one the next overwrites: good until the next is asked for (a consumer
   * that writes it out, hashes it or encodes it before asking again). Otherwise each is a new buffer.
   */
  reuse?: boolean;
}

/**
 * A buffer for each chunk's bytes: the same one again (`reuse`, taken from the pool at the first chunk and
 * given back by `release`), or a new one each time.
 */
function outputs(max: number, reuse: boolean | undefined): { out: (length: number) => Buffer; release: () => void } {
  if (!reuse) return { out: (length) => Buffer.allocUnsafe(length), release: () => {} };
  let buf: Buffer | null = null;
  return {
    out: (length) => {
      buf ??= takeBuffer(max);
      return buf.subarray(0, length);
    },
    release: () => {
      if (buf) giveBuffer(buf);
      buf = null;
    },
  };
}

/**
 * Cuts a stream of pieces into whole units of `lengthOf(i)` bytes, unit `first` first: each unit is a view
 * of a piece when one holds it whole, else gathered in one buffer reused from unit to unit. `use` runs on
 * each unit before the next piece is asked for (so a source may hand out one buffer again and again) and
 * gives what is yielded. Returns how many units were whole and how many bytes of the next were in.
 */
async function* units<T>(
  source: AsyncIterable<Uint8Array>,
  first: number,
  count: number,
  /** A whole unit's length: the gather buffer's, whatever the file (a file's own size would give the pool a new size each time). */
  whole: number,
  lengthOf: (i: number) => number,
  tooLong: () => Error,
  use: (unit: Uint8Array, index: number) => T,
  /** Gives back what `use` writes into, once the pass ends: the consumer asked for the next unit, or stopped asking. */
  release: () => void,
): AsyncGenerator<T, { index: number; fed: number }> {
  let index = first;
  // Taken from the pool at the first unit that needs it, given back however the pass ends: `use` is done
  // with a gathered unit before the next piece is asked for.
  let gather: Buffer | null = null;
  let fed = 0;
  try {
    for await (const piece of source) {
      for (let at = 0; at < piece.length; ) {
        if (index >= count) throw tooLong();
        const want = lengthOf(index);
        if (fed === 0 && piece.length - at >= want) {
          yield use(piece.subarray(at, at + want), index++);
          at += want;
          continue;
        }
        gather ??= takeBuffer(whole);
        const n = Math.min(piece.length - at, want - fed);
        gather.set(piece.subarray(at, at + n), fed);
        at += n;
        fed += n;
        if (fed < want) continue;
        fed = 0;
        yield use(gather.subarray(0, want), index++);
      }
    }
    // An empty file is one empty final chunk.
    if (index === count - 1 && lengthOf(index) === 0) yield use(new Uint8Array(0), index++);
  } finally {
    if (gather) giveBuffer(gather);
    release();
  }
  return { index, fed };
}

/**
 * Seals the plaintext of a `size`-byte file, from chunk `first` on (`source` starts at that chunk's first
 * byte): each sealed chunk (its ciphertext, then its tag) in order. A source may hand out views of one
 * buffer it reuses: each is sealed before the next is asked for. Throws if the source is longer or shorter
 * than `size` says (a file changed while it was read).
 */
export async function* sealChunks(
  source: AsyncIterable<Uint8Array>,
  key: Uint8Array,
  chunk: number,
  size: number,
  first = 0,
  opts: ChunkOptions = {},
): AsyncGenerator<Buffer> {
  const count = chunkCount(size, chunk);
  const lengthOf = (i: number) => (i === count - 1 ? size - i * chunk : chunk);
  const { out, release } = outputs(chunk + TAG_BYTES, opts.reuse);
  const sealed = (plain: Uint8Array, index: number) => {
    const bytes = out(plain.length + TAG_BYTES);
    chachaSeal(bytes, plain, nonce(index, index === count - 1), key);
    return bytes;
  };
  const longer = () => new Error(`the file is longer than ${size} bytes: it changed while it was read`);
  const ended = yield* units(source, first, count, chunk, lengthOf, longer, sealed, release);
  if (ended.index < count) throw new Error(`the file is shorter than ${size} bytes: it changed while it was read`);
}

/**
 * The sha2-256 of a `size`-byte file's sealed bytes, none of them kept: what its address names (a first
 * pass before its upload). The same bytes sealChunks gives out, hashed as they are made.
 */
export async function sealedDigest(source: AsyncIterable<Uint8Array>, key: Uint8Array, chunk: number, size: number): Promise<Buffer> {
  const hash = createHash('sha256');
  for await (const sealed of sealChunks(source, key, chunk, size, 0, { reuse: true })) hash.update(sealed);
  return hash.digest();
}

/**
 * Opens a sealed stream that starts at chunk `first`: each chunk's plaintext, given out only once its tag
 * checked (never one byte unchecked). Throws BlobDamagedError on a chunk that does not open, a stream that
 * ends before the last chunk, or bytes after it.
 */
export async function* openChunks(
  source: AsyncIterable<Uint8Array>,
  key: Uint8Array,
  chunk: number,
  size: number,
  first = 0,
  opts: ChunkOptions = {},
): AsyncGenerator<Buffer> {
  const count = chunkCount(size, chunk);
  const lengthOf = (i: number) => (i === count - 1 ? size - i * chunk : chunk) + TAG_BYTES;
  const { out, release } = outputs(chunk, opts.reuse);
  const opened = (sealed: Uint8Array, index: number) => {
    const plain = out(sealed.length - TAG_BYTES);
    if (!chachaOpen(plain, sealed, nonce(index, index === count - 1), key))
      throw new BlobDamagedError(`chunk ${index} does not open with the file's key: the blob is damaged or not this file`);
    return plain;
  };
  const longer = () => new BlobDamagedError('the blob is longer than its file: bytes follow the last chunk');
  const { index, fed } = yield* units(source, first, count, chunk + TAG_BYTES, lengthOf, longer, opened, release);
  if (index < count)
    throw new BlobDamagedError(
      fed > 0
        ? `the blob ends inside chunk ${index}: it was cut short`
        : `the blob ends after chunk ${index - 1} of ${count}: it was cut short`,
    );
}
