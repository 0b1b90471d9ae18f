// SPEC §3 (issue 20): the sample digest service decodes each file's base64 as the body arrives, whatever
// the pieces the body comes in; each file's size and sha-256 are those of the bytes sent.
import test from 'ava';
import { createHash, randomBytes } from 'node:crypto';
import { digestBody } from '../../src/service/digest.js';

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** `body` cut into pieces of the given lengths in turn. */
async function* cut(body: Buffer, lengths: number[]): AsyncGenerator<Buffer> {
  for (let at = 0, i = 0; at < body.length; i++) {
    const n = lengths[i % lengths.length]!;
    yield body.subarray(at, at + n);
    at += n;
  }
}

test('SPEC §3: files decoded across pieces of any length, one piece larger than the decode buffer, names not ASCII', async (t) => {
  const files = [
    { name: 'résumé.png', mime: 'image/png', bytes: randomBytes(200_001) },
    { name: 'b.bin', mime: 'application/octet-stream', bytes: randomBytes(2) },
    { name: 'empty', mime: 'application/octet-stream', bytes: Buffer.alloc(0) },
  ];
  const body = Buffer.from(
    JSON.stringify({ args: { n: 1 }, files: files.map((f) => ({ name: f.name, mime: f.mime, data_b64: f.bytes.toString('base64') })) }),
  );
  const want = files.map((f) => ({ name: f.name, mime: f.mime, bytes: f.bytes.length, sha256: sha256(f.bytes) }));
  for (const lengths of [[1], [3, 5, 7], [4093, 1], [100, body.length], [body.length]]) {
    const parsed = await digestBody(cut(body, lengths));
    t.deepEqual(parsed.args, { n: 1 });
    t.deepEqual(parsed.files, want, `pieces of ${lengths.join(', ')} bytes`);
  }
});
