// A file's encryption for the hub (PROTOCOL §6.8, issue 20): the STREAM construction (Hoang, Reyhanitabar,
// Rogaway, Vizár 2015; the one age and Tink use) over ChaCha20-Poly1305 from node:crypto. The plaintext is
// cut in chunks of `chunk` bytes; chunk i is sealed under the file's own fresh key with the nonce
// `i as 11 big-endian bytes ‖ last`, where `last` is 1 for the final chunk and 0 for every other. So each
// chunk is authenticated on its own (a download is checked chunk by chunk, never held whole), chunks cannot
// be reordered (the counter), and a ciphertext cut after a whole chunk is detected (no chunk before the
// last one opens as the last). A key is used for one file only, so the nonce needs no random part.
//
// node:crypto's ChaCha20-Poly1305 (OpenSSL; measured ~2 GB/s on one core here when its output lands in
// memory already touched, ~0.5 GB/s when every output buffer is fresh) rather than a JS one: a
// 64 MiB file is sealed twice on upload (once to learn its content address, once to send it). Both ways
// run over the bytes as they come, a cipher per chunk fed piece by piece: a chunk is never copied into one
// buffer (at 64 MiB a file, each copy and each fresh buffer cost this path measurable CPU).
import { type CipherChaCha20Poly1305, createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

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

/**
 * Seals the plaintext of a `size`-byte file, from chunk `first` on (`source` starts at that chunk's first
 * byte): the sealed bytes in order, as parts (each source piece's ciphertext as it is read, each chunk's
 * tag after it): no chunk is ever gathered in one buffer. A source may hand out views of one buffer it
 * reuses: each is sealed before the next is asked for. Throws if the source is longer or shorter than
 * `size` says (a file changed while it was read).
 */
export function sealChunks(
  source: AsyncIterable<Uint8Array>,
  key: Uint8Array,
  chunk: number,
  size: number,
  first = 0,
): AsyncGenerator<Buffer> {
  return sealWith(source, key, chunk, size, first, (cipher, plain) => cipher.update(plain));
}

/** How a piece of plaintext is sealed: its ciphertext as the caller wants it. */
type Update<T> = (cipher: CipherChaCha20Poly1305, plain: Uint8Array) => T;

/** sealChunks with the ciphertext of each piece given out by `update`; each chunk's tag after it, a Buffer. */
async function* sealWith<T>(
  source: AsyncIterable<Uint8Array>,
  key: Uint8Array,
  chunk: number,
  size: number,
  first: number,
  update: Update<T>,
): AsyncGenerator<T | Buffer> {
  const count = chunkCount(size, chunk);
  const lengthOf = (i: number) => (i === count - 1 ? size - i * chunk : chunk);
  let index = first;
  let cipher = index < count ? cipherFor(key, index, index === count - 1) : null;
  /** Plaintext bytes of chunk `index` sealed so far. */
  let fed = 0;
  const end = function* (): Generator<Buffer> {
    cipher!.final();
    yield cipher!.getAuthTag();
    index++;
    fed = 0;
    cipher = index < count ? cipherFor(key, index, index === count - 1) : null;
  };
  for await (const piece of source) {
    for (let at = 0; at < piece.length; ) {
      if (!cipher) throw new Error(`the file is longer than ${size} bytes: it changed while it was read`);
      const n = Math.min(piece.length - at, lengthOf(index) - fed);
      yield update(cipher, piece.subarray(at, at + n));
      at += n;
      fed += n;
      if (fed === lengthOf(index)) yield* end();
    }
  }
  // An empty file is one empty final chunk.
  if (cipher && lengthOf(index) === 0) yield* end();
  if (index < count) throw new Error(`the file is shorter than ${size} bytes: it changed while it was read`);
}

function cipherFor(key: Uint8Array, index: number, last: boolean): CipherChaCha20Poly1305 {
  return createCipheriv('chacha20-poly1305', key, nonce(index, last), { authTagLength: TAG_BYTES });
}

/**
 * Pieces of at most this many bytes go through the cipher when only the sealed bytes' digest is wanted:
 * taken as latin1 strings of this size, the ciphertext lives in V8's young generation, whose pages are
 * reused at once, where a Buffer per piece would touch fresh memory (each 4 KiB page a fault, dear on some
 * VMs). Measured for 64 MiB in a new process: ~125 ms and ~2k page faults, against ~200 ms and ~9k.
 */
const DIGEST_SLICE = 32 * 1024;

/**
 * The sha2-256 of a `size`-byte file's sealed bytes, none of them kept: what its address names (a first
 * pass before its upload). The same bytes sealChunks gives out, hashed as they are made.
 */
export async function sealedDigest(source: AsyncIterable<Uint8Array>, key: Uint8Array, chunk: number, size: number): Promise<Buffer> {
  const hash = createHash('sha256');
  // Each piece's ciphertext is hashed as it is made (nothing is given out but the tags).
  const hashed = (cipher: CipherChaCha20Poly1305, plain: Uint8Array) => {
    for (let at = 0; at < plain.length; at += DIGEST_SLICE)
      hash.update(cipher.update(plain.subarray(at, at + DIGEST_SLICE), undefined, 'latin1'), 'latin1');
  };
  for await (const tag of sealWith(source, key, chunk, size, 0, hashed)) if (tag) hash.update(tag);
  return hash.digest();
}

/**
 * Opens a sealed stream that starts at chunk `first`: the plaintext, as parts, each chunk's given out only
 * once its tag checked (never one byte unchecked), none gathered in one buffer. Throws BlobDamagedError on
 * a chunk that does not open, a stream that ends before the last chunk, or bytes after it.
 */
export async function* openChunks(
  source: AsyncIterable<Uint8Array>,
  key: Uint8Array,
  chunk: number,
  size: number,
  first = 0,
): AsyncGenerator<Buffer> {
  const count = chunkCount(size, chunk);
  const lengthOf = (i: number) => (i === count - 1 ? size - i * chunk : chunk);
  let index = first;
  let decipher = index < count ? decipherFor(key, index, index === count - 1) : null;
  /** Chunk `index`: its plaintext so far (unchecked, held), ciphertext bytes read, and its tag's bytes. */
  let plain: Buffer[] = [];
  let fed = 0;
  let tag = Buffer.alloc(TAG_BYTES);
  let tagged = 0;
  for await (const sealed of source) {
    for (let at = 0; at < sealed.length; ) {
      if (!decipher) throw new BlobDamagedError('the blob is longer than its file: bytes follow the last chunk');
      const body = lengthOf(index);
      if (fed < body) {
        const n = Math.min(sealed.length - at, body - fed);
        plain.push(decipher.update(sealed.subarray(at, at + n)));
        at += n;
        fed += n;
        continue;
      }
      const n = Math.min(sealed.length - at, TAG_BYTES - tagged);
      tag.set(sealed.subarray(at, at + n), tagged);
      at += n;
      tagged += n;
      if (tagged < TAG_BYTES) continue;
      decipher.setAuthTag(tag);
      try {
        decipher.final();
      } catch {
        throw new BlobDamagedError(`chunk ${index} does not open with the file's key: the blob is damaged or not this file`);
      }
      yield* plain;
      index++;
      decipher = index < count ? decipherFor(key, index, index === count - 1) : null;
      plain = [];
      fed = 0;
      tag = Buffer.alloc(TAG_BYTES);
      tagged = 0;
    }
  }
  if (index < count)
    throw new BlobDamagedError(
      fed > 0 || tagged > 0
        ? `the blob ends inside chunk ${index}: it was cut short`
        : `the blob ends after chunk ${index - 1} of ${count}: it was cut short`,
    );
}

function decipherFor(key: Uint8Array, index: number, last: boolean) {
  return createDecipheriv('chacha20-poly1305', key, nonce(index, last), { authTagLength: TAG_BYTES });
}
