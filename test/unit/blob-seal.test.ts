// PROTOCOL §6.8 (issue 20): a file's chunked encryption. Every size round-trips; a blob cut after a whole
// chunk, with chunks swapped, with bytes added or one byte changed does not open; a resumed upload sends
// exactly the bytes a whole one would have from that offset.
import test from 'ava';
import { createCipheriv, createHash, randomBytes } from 'node:crypto';
import {
  BlobDamagedError,
  MIN_CHUNK,
  TAG_BYTES,
  chunkCount,
  isChunkSize,
  newBlobKey,
  openChunks,
  sealChunks,
  sealedDigest,
  sealedSize,
} from '../../src/protocol/blob-seal.js';
import { sealedFrom } from '../../src/hub-client/blobs.js';
import { bytesSource } from '../../src/node/caller/files.js';

const C = MIN_CHUNK;

async function collect(gen: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const p of gen) parts.push(Buffer.from(p));
  return Buffer.concat(parts);
}

/** A source that hands out bytes in odd pieces, so chunk boundaries never line up with reads. */
async function* oddly(bytes: Buffer): AsyncGenerator<Buffer> {
  for (let at = 0; at < bytes.length; ) {
    const n = 1 + ((at * 7919) % 50_000);
    yield bytes.subarray(at, at + n);
    at += n;
  }
}

const seal = (plain: Buffer, key: Uint8Array) => collect(sealChunks(oddly(plain), key, C, plain.length));
const open = (sealed: Buffer, key: Uint8Array, size: number) => collect(openChunks(oddly(sealed), key, C, size));

for (const size of [0, 1, C - 1, C, C + 1, 3 * C, 3 * C + 17]) {
  test(`PROTOCOL §6.8: a file of ${size} bytes seals to its predicted size and opens to itself`, async (t) => {
    const plain = randomBytes(size);
    const key = newBlobKey();
    const sealed = await seal(plain, key);
    t.is(sealed.length, sealedSize(size, C));
    t.is(sealed.length, size + TAG_BYTES * chunkCount(size, C));
    t.deepEqual(await open(sealed, key, size), plain);
  });
}

/** The construction as PROTOCOL §6.8 writes it, with node:crypto's ChaCha20-Poly1305 (OpenSSL): the reference. */
function referenceSeal(plain: Buffer, key: Uint8Array, chunk: number): Buffer {
  const count = chunkCount(plain.length, chunk);
  const out: Buffer[] = [];
  for (let i = 0; i < count; i++) {
    const nonce = Buffer.alloc(12);
    nonce.writeUIntBE(i, 5, 6);
    nonce[11] = i === count - 1 ? 1 : 0;
    const cipher = createCipheriv('chacha20-poly1305', key, nonce, { authTagLength: TAG_BYTES });
    out.push(cipher.update(plain.subarray(i * chunk, (i + 1) * chunk)), cipher.final(), cipher.getAuthTag());
  }
  return Buffer.concat(out);
}

test('PROTOCOL §6.8: the sealed bytes are those of the construction as OpenSSL computes it, byte for byte (blobs of older nodes open here, and ours there)', async (t) => {
  for (const size of [0, 1, C, 3 * C + 17]) {
    const plain = randomBytes(size);
    const key = newBlobKey();
    const reference = referenceSeal(plain, key, C);
    t.deepEqual(await seal(plain, key), reference, `${size} bytes`);
    t.deepEqual(await collect(sealChunks(reusing(plain), key, C, size, 0, { reuse: true })), reference, `${size} bytes, reused buffers`);
    t.deepEqual(await open(reference, key, size), plain);
    t.deepEqual(
      await collect(openChunks(oddly(reference), key, C, size, 0, { reuse: true })),
      plain,
      `${size} bytes, opened into one buffer`,
    );
  }
});

test('PROTOCOL §6.8: a blob cut after a whole chunk, chunks swapped, a byte changed or bytes added never opens', async (t) => {
  const plain = randomBytes(3 * C);
  const key = newBlobKey();
  const sealed = await seal(plain, key);
  const sc = C + TAG_BYTES;
  const cut = sealed.subarray(0, 2 * sc);
  await t.throwsAsync(open(cut, key, plain.length), { instanceOf: BlobDamagedError });
  // Cut after chunk 2 and told the file is 2 chunks long: chunk 1 was sealed as not-last.
  await t.throwsAsync(open(cut, key, 2 * C), { instanceOf: BlobDamagedError });
  const swapped = Buffer.concat([sealed.subarray(sc, 2 * sc), sealed.subarray(0, sc), sealed.subarray(2 * sc)]);
  await t.throwsAsync(open(swapped, key, plain.length), { instanceOf: BlobDamagedError });
  const flipped = Buffer.from(sealed);
  flipped[C + 5]! ^= 1;
  await t.throwsAsync(open(flipped, key, plain.length), { instanceOf: BlobDamagedError });
  await t.throwsAsync(open(Buffer.concat([sealed, Buffer.from([0])]), key, plain.length), { instanceOf: BlobDamagedError });
  await t.throwsAsync(open(sealed, newBlobKey(), plain.length), { instanceOf: BlobDamagedError });
});

/** A source that reads into one buffer again and again, in odd sizes (as a file read into a reused buffer). */
async function* reusing(bytes: Buffer): AsyncGenerator<Buffer> {
  const buf = Buffer.alloc(50_000);
  for (let at = 0; at < bytes.length; ) {
    const n = Math.min(1 + ((at * 7919) % 50_000), bytes.length - at);
    bytes.copy(buf, 0, at, at + n);
    yield buf.subarray(0, n);
    buf.fill(0xee);
    at += n;
  }
}

test('PROTOCOL §6.8: a source that hands out one buffer again and again seals to the same bytes', async (t) => {
  const plain = randomBytes(3 * C + 17);
  const key = newBlobKey();
  const again = await collect(sealChunks(reusing(plain), key, C, plain.length));
  t.deepEqual(again, await seal(plain, key));
  t.deepEqual(await open(again, key, plain.length), plain);
});

test('PROTOCOL §6.8, §8.11: the digest of the first pass is the sha-256 of exactly the bytes sealChunks gives out', async (t) => {
  for (const size of [0, 1, C - 1, C, 3 * C + 17, 2 * 32 * 1024 + 5]) {
    const plain = randomBytes(size);
    const key = newBlobKey();
    const sealed = await seal(plain, key);
    t.deepEqual(await sealedDigest(reusing(plain), key, C, size), createHash('sha256').update(sealed).digest(), `${size} bytes`);
  }
  await t.throwsAsync(sealedDigest(oddly(randomBytes(C)), newBlobKey(), C, C + 1), { message: /changed while it was read/ });
});

test('PROTOCOL §6.8: no byte of a chunk is given out before its tag checked', async (t) => {
  const plain = randomBytes(3 * C);
  const key = newBlobKey();
  const sealed = await seal(plain, key);
  // A byte of chunk 1 changed: chunk 0 opens and is given out; nothing of chunk 1 is.
  sealed[C + TAG_BYTES + 100]! ^= 1;
  const given: Buffer[] = [];
  await t.throwsAsync(
    (async () => {
      for await (const p of openChunks(oddly(sealed), key, C, plain.length)) given.push(Buffer.from(p));
    })(),
    { instanceOf: BlobDamagedError, message: /chunk 1 / },
  );
  t.deepEqual(Buffer.concat(given), plain.subarray(0, C));
});

test('PROTOCOL §6.8: sealing a file that changed size while read fails rather than sealing a different file', async (t) => {
  const plain = randomBytes(2 * C);
  const key = newBlobKey();
  await t.throwsAsync(collect(sealChunks(oddly(plain), key, C, plain.length + 1)), { message: /changed while it was read/ });
  await t.throwsAsync(collect(sealChunks(oddly(plain), key, C, plain.length - 1)), { message: /changed while it was read/ });
});

test('PROTOCOL §8.11: an upload resumed from any offset sends exactly the rest of the whole upload', async (t) => {
  const plain = randomBytes(3 * C + 100);
  const key = newBlobKey();
  const src = bytesSource(plain);
  const whole = await collect(sealedFrom(src, key, C, 0));
  for (const from of [0, 1, C, C + TAG_BYTES, C + TAG_BYTES + 3, 2 * (C + TAG_BYTES), whole.length - 1, whole.length])
    t.deepEqual(await collect(sealedFrom(src, key, C, from)), whole.subarray(from), `from ${from}`);
});

test('PROTOCOL §6.8: chunk sizes', (t) => {
  t.true(isChunkSize(1 << 20));
  t.true(isChunkSize(1 << 16));
  t.false(isChunkSize((1 << 20) + 1));
  t.false(isChunkSize(1 << 15));
  t.false(isChunkSize(1 << 21));
});

/** Runs passes at once, one chunk of each in turn (each read only after the other pass moved on): each one's bytes. */
async function inTurn(passes: AsyncIterable<Uint8Array>[]): Promise<Buffer[]> {
  const its = passes.map((p) => p[Symbol.asyncIterator]());
  const got: Buffer[][] = its.map(() => []);
  for (let open = its.length; open > 0; ) {
    open = 0;
    for (const [i, it] of its.entries()) {
      const next = await it.next();
      if (next.done) continue;
      open++;
      got[i]!.push(Buffer.from(next.value));
    }
  }
  return got.map((parts) => Buffer.concat(parts));
}

test('PROTOCOL §6.8: passes with reused buffers that run at once, chunk by chunk in turn, each give their own bytes (each holds its own pooled buffer), also after earlier passes gave theirs back', async (t) => {
  const files = [randomBytes(3 * C + 17), randomBytes(2 * C + 5)];
  const keys = files.map(() => newBlobKey());
  for (let round = 0; round < 2; round++) {
    const got = await inTurn(files.map((f, i) => sealChunks(reusing(f), keys[i]!, C, f.length, 0, { reuse: true })));
    for (const [i, f] of files.entries()) t.deepEqual(got[i], referenceSeal(f, keys[i]!, C), `file ${i + 1}, round ${round + 1}`);
  }
  // Opened the same way, with odd reads (each pass gathers its chunks in a pooled buffer of its own).
  const sealed = files.map((f, i) => referenceSeal(f, keys[i]!, C));
  const plain = await inTurn(files.map((f, i) => openChunks(oddly(sealed[i]!), keys[i]!, C, f.length, 0, { reuse: true })));
  for (const [i, f] of files.entries()) t.true(plain[i]!.equals(f), `file ${i + 1} opened`);
});
