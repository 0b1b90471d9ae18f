// Issue 20 (no process holds a whole file), PROTOCOL §8.11: a hub receiving a blob, with a download
// following it, holds only the piece being filled — not every chunk received so far, nor every piece
// sent. Alone in its file: the measure is this process's ArrayBuffers after a full GC, and other tests
// running beside it would add their own. The uploader and the follower are another process, so their
// buffers are not counted here.
import test from 'ava';
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { blobCid } from '../src/protocol/blob-address.js';
import { startTestHub } from './helpers/hub.js';
import { tempDir } from './helpers/tmp.js';
import { until } from './helpers/wait.js';

const MIB = 1024 * 1024;
const SIZE = 40 * MIB;
const FIRST = 32 * MIB;

/** A full collection (the flag set now reaches contexts made from now on: the gc function of a new one). */
function collector(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

/**
 * This process's ArrayBuffer bytes after full collections: the least of a few readings, a turn of the
 * event loop apart. V8 frees the memory of dead ArrayBuffers on a sweeper thread, so a reading taken
 * right after a collection on a loaded machine can still count buffers that are already dead; a buffer
 * still referenced is counted in every reading.
 */
async function heldAfterGc(): Promise<number> {
  const gc = collector();
  let least = Number.POSITIVE_INFINITY;
  for (let i = 0; i < 5; i++) {
    gc();
    await new Promise((r) => setTimeout(r, 50));
    least = Math.min(least, process.memoryUsage().arrayBuffers);
  }
  return least;
}

/** A file of random bytes written a MiB at a time (so this process never holds it whole); its cid. */
async function randomFile(path: string, size: number): Promise<string> {
  const hash = createHash('sha256');
  const file = await open(path, 'w');
  try {
    for (let at = 0; at < size; at += MIB) {
      const piece = randomBytes(Math.min(MIB, size - at));
      hash.update(piece);
      await file.write(piece);
    }
  } finally {
    await file.close();
  }
  return blobCid(hash.digest());
}

/**
 * A child that PUTs the file's first FIRST bytes, waits for a line on stdin, then sends the rest; and
 * follows the blob with a GET meanwhile. It prints `followed N` as the download gets bytes, `done S` with
 * the PUT's status.
 */
const CHILD = `
import { request } from 'node:http';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
const [url, cid, path, first] = process.argv.slice(1);
const bytes = readFileSync(path);
const put = request(url + '/blobs/' + cid, { method: 'PUT', headers: {
  'x-anet-blob-size': String(bytes.length), 'x-anet-blob-offset': '0', 'content-length': String(bytes.length) } },
  (res) => { res.resume(); res.on('end', () => console.log('done ' + res.statusCode)); });
const send = (from, to) => { for (let at = from; at < to; at += 65536) put.write(bytes.subarray(at, Math.min(at + 65536, to))); };
send(0, Number(first));
// Follows once the hub has the upload: on a loaded machine the PUT's head may not have been read yet,
// and a GET before it is 404 — asked again until it is not.
const follow = () => request(url + '/blobs/' + cid, (res) => {
  if (res.statusCode !== 200) { res.resume(); setTimeout(follow, 50); return; }
  let n = 0;
  res.on('data', (c) => { n += c.length; console.log('followed ' + n); });
}).end();
setTimeout(follow, 100);
createInterface({ input: process.stdin }).once('line', () => { send(Number(first), bytes.length); put.end(); });
`;

test('issue 20 / PROTOCOL §8.11: a hub receiving a blob followed by a download holds about a piece of it, not what came so far', async (t) => {
  const root = await tempDir(t, 'anet-hub-blob-memory-');
  const hub = await startTestHub({ dataDir: join(root, 'hub'), port: 0 });
  t.teardown(() => hub.close());
  const path = join(root, 'file.bin');
  const cid = await randomFile(path, SIZE);
  const child = spawn(process.execPath, ['--input-type=module', '-e', CHILD, hub.url, cid, path, String(FIRST)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  t.teardown(() => child.kill());
  let followed = 0;
  let done = '';
  createInterface({ input: child.stdout! }).on('line', (line) => {
    if (line.startsWith('followed ')) followed = Number(line.slice(9));
    if (line.startsWith('done ')) done = line.slice(5);
  });
  // Every piece of the first part stored (and all but the piece the follower waits on sent). What may be
  // held then: the piece being filled, and the download's two or three read buffers of a piece each.
  await until(async () => followed >= FIRST - MIB, 'the follower has the first 31 MiB', 1500);
  const held = await heldAfterGc();
  t.log(`held ${(held / MIB).toFixed(1)} MiB`);
  t.true(held < 7 * MIB, `after ${FIRST / MIB} MiB received and sent, the hub holds ${(held / MIB).toFixed(1)} MiB of buffers`);
  child.stdin!.write('go\n');
  await until(async () => done !== '', 'the upload answered', 1500);
  t.is(done, '200');
  await until(async () => followed === SIZE, 'the follower got the whole blob', 1500);
  // The dead socket read buffers were collected as the bytes came (src/util/young-gc.ts): a young
  // collection after each 8 MiB stored.
  t.is(hub.blobs.received.runs, Math.floor(SIZE / (8 * MIB)), 'one young collection per 8 MiB of the upload');
});
