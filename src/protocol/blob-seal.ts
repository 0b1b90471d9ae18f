// A file's encryption for the hub (PROTOCOL §6.8, issue 20): the STREAM construction (Hoang, Reyhanitabar,
// Rogaway, Vizár 2015; the one age and Tink use) over ChaCha20-Poly1305 from node:crypto. The plaintext is
// cut in chunks of `chunk` bytes; chunk i is sealed under the file's own fresh key with the nonce
// `i as 11 big-endian bytes ‖ last`, where `last` is 1 for the final chunk and 0 for every other. So each
// chunk is authenticated on its own (a download is checked chunk by chunk, never held whole), chunks cannot
// be reordered (the counter), and a ciphertext cut after a whole chunk is detected (no chunk before the
// last one opens as the last). A key is used for one file only, so the nonce needs no random part.
//
// node:crypto's ChaCha20-Poly1305 (OpenSSL; measured ~750 MB/s on one core here) rather than a JS one: a
// 64 MiB file is sealed twice on upload (once to learn its content address, once to send it).
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

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

export function sealChunk(key: Uint8Array, index: number, last: boolean, plain: Uint8Array): Buffer {
  const c = createCipheriv('chacha20-poly1305', key, nonce(index, last), { authTagLength: TAG_BYTES });
  const out = Buffer.allocUnsafe(plain.length + TAG_BYTES);
  const body = c.update(plain);
  body.copy(out, 0);
  c.final();
  c.getAuthTag().copy(out, plain.length);
  return out;
}

export function openChunk(key: Uint8Array, index: number, last: boolean, sealed: Uint8Array): Buffer {
  if (sealed.length < TAG_BYTES) throw new BlobDamagedError(`chunk ${index} is shorter than its tag`);
  const d = createDecipheriv('chacha20-poly1305', key, nonce(index, last), { authTagLength: TAG_BYTES });
  d.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
  const plain = d.update(sealed.subarray(0, sealed.length - TAG_BYTES));
  try {
    d.final();
  } catch {
    throw new BlobDamagedError(`chunk ${index} does not open with the file's key: the blob is damaged or not this file`);
  }
  return plain;
}

/**
 * Cuts a byte stream into pieces of exactly `size` bytes (the last one shorter), copying only where a
 * piece spans two of the source's chunks.
 */
export async function* exactPieces(source: AsyncIterable<Uint8Array>, size: number): AsyncGenerator<Buffer> {
  let parts: Buffer[] = [];
  let held = 0;
  for await (const c of source) {
    let chunk = Buffer.from(c.buffer, c.byteOffset, c.byteLength);
    while (held + chunk.length >= size) {
      const take = size - held;
      parts.push(chunk.subarray(0, take));
      yield parts.length === 1 ? parts[0]! : Buffer.concat(parts, size);
      chunk = chunk.subarray(take);
      parts = [];
      held = 0;
    }
    if (chunk.length > 0) {
      parts.push(chunk);
      held += chunk.length;
    }
  }
  if (held > 0) yield Buffer.concat(parts, held);
}

/**
 * Seals the plaintext of a `size`-byte file, from chunk `first` on (`source` starts at that chunk's first
 * byte): the sealed chunks in order. Throws if the source is longer or shorter than `size` says (a file
 * changed while it was read).
 */
export async function* sealChunks(
  source: AsyncIterable<Uint8Array>,
  key: Uint8Array,
  chunk: number,
  size: number,
  first = 0,
): AsyncGenerator<Buffer> {
  const count = chunkCount(size, chunk);
  let index = first;
  for await (const piece of exactPieces(source, chunk)) {
    if (index >= count) throw new Error(`the file is longer than ${size} bytes: it changed while it was read`);
    const expected = index === count - 1 ? size - index * chunk : chunk;
    if (piece.length !== expected) throw new Error(`the file is not ${size} bytes: it changed while it was read`);
    yield sealChunk(key, index, index === count - 1, piece);
    index++;
  }
  // An empty file is one empty final chunk.
  if (size === 0 && index === 0) {
    yield sealChunk(key, 0, true, new Uint8Array());
    index = 1;
  }
  if (index < count) throw new Error(`the file is shorter than ${size} bytes: it changed while it was read`);
}

/**
 * Opens a sealed stream that starts at chunk `first`: the plaintext chunk by chunk, each checked before it
 * is given out. Throws BlobDamagedError on a chunk that does not open, a stream that ends before the last
 * chunk, or bytes after it.
 */
export async function* openChunks(
  source: AsyncIterable<Uint8Array>,
  key: Uint8Array,
  chunk: number,
  size: number,
  first = 0,
): AsyncGenerator<Buffer> {
  const count = chunkCount(size, chunk);
  let index = first;
  for await (const sealed of exactPieces(source, chunk + TAG_BYTES)) {
    if (index >= count) throw new BlobDamagedError('the blob is longer than its file: bytes follow the last chunk');
    const last = index === count - 1;
    const expected = (last ? size - index * chunk : chunk) + TAG_BYTES;
    if (sealed.length !== expected) throw new BlobDamagedError(`the blob ends inside chunk ${index}: it was cut short`);
    yield openChunk(key, index, last, sealed);
    index++;
  }
  if (index < count) throw new BlobDamagedError(`the blob ends after chunk ${index - 1} of ${count}: it was cut short`);
}
