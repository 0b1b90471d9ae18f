// Issue 20, PROTOCOL §8.11 (PUT /blobs/<cid>, GET /blobs/<cid>): how a hub moves a blob along. An upload
// is read on while its last whole piece is being stored (pieces still stored one at a time, in order),
// and a download following an upload hears every change, also one that came while it was busy sending,
// and sends from memory only the pieces of the record it follows.
// Real hubs on the test's backend; a gate on the storage's writePiece holds a store open so the test can
// see what the hub does meanwhile.
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { join } from 'node:path';
import { BLOB_PIECE } from '../src/protocol/blob-address.js';
import type { Hub } from '../src/hub/server.js';
import type { Follow, StoredPiece } from '../src/hub/blobs.js';
import { startTestHub } from './helpers/hub.js';
import { tempDir } from './helpers/tmp.js';
import { until } from './helpers/wait.js';
import { collect, cidOf, putting } from './helpers/blob-http.js';

const MIB = BLOB_PIECE;

async function hubFor(t: Parameters<typeof tempDir>[0]): Promise<Hub> {
  const root = await tempDir(t, 'anet-hub-blob-pipeline-');
  const hub = await startTestHub({ dataDir: join(root, 'hub'), port: 0 });
  t.teardown(() => hub.close());
  return hub;
}

/** The storage's writePiece, held at piece `index` until `open()`; each call's start and end, in order. */
function gate(hub: Hub, index: number, fail = false) {
  const store = hub.storage.blobs;
  const real = store.writePiece.bind(store);
  const log: string[] = [];
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  store.writePiece = async (cid, i, bytes, now) => {
    log.push(`start ${i}`);
    if (i === index) {
      await opened;
      if (fail) {
        log.push(`failed ${i}`);
        throw new Error('the disk is gone');
      }
    }
    const r = await real(cid, i, bytes, now);
    log.push(`end ${i}`);
    return r;
  };
  return { log, open };
}

test('issue 20 / PROTOCOL §8.11 (PUT): the hub reads the next piece while one is stored, and stores them one at a time, in order', async (t) => {
  const hub = await hubFor(t);
  const bytes = randomBytes(3 * MIB + 5);
  const cid = cidOf(bytes);
  const { log, open } = gate(hub, 0);
  const { req, answer } = putting(hub.url, cid, bytes.length, 0, bytes.length);
  req.end(bytes);
  // Piece 0 is held in its store: the hub reads on and fills piece 1 meanwhile (two pieces held), and goes
  // no further (piece 1 waits for piece 0).
  await until(() => hub.blobs.pieces.used === 2 * MIB, 'piece 1 filled while piece 0 is being stored');
  t.deepEqual(log, ['start 0'], 'piece 1 is not stored before piece 0 is');
  open();
  const a = await answer;
  t.is(a.status, 200, a.body.toString());
  t.deepEqual(a.json(), { received: bytes.length, size: bytes.length, complete: true });
  t.deepEqual(log, ['start 0', 'end 0', 'start 1', 'end 1', 'start 2', 'end 2', 'start 3', 'end 3']);
  t.is(hub.blobs.pieces.used, 0, 'every piece given back to the budget');
});

test('issue 20 / PROTOCOL §8.11 (PUT): a store that fails while the next piece fills fails the upload, keeps the pieces before it, and gives the budget back', async (t) => {
  const hub = await hubFor(t);
  const bytes = randomBytes(4 * MIB);
  const cid = cidOf(bytes);
  const { log, open } = gate(hub, 1, true);
  const { req, answer } = putting(hub.url, cid, bytes.length, 0, bytes.length);
  req.end(bytes);
  // Piece 0 stored and given back, piece 1 held in its store, piece 2 filled meanwhile.
  await until(() => log.includes('start 1') && hub.blobs.pieces.used === 2 * MIB, 'piece 2 filled while piece 1 is being stored');
  open();
  const a = await answer;
  t.is(a.status, 500, a.body.toString());
  t.deepEqual(log, ['start 0', 'end 0', 'start 1', 'failed 1'], 'no piece after the failed one is stored');
  const s = await hub.storage.blobs.status(cid);
  t.is(s?.received, MIB, 'the piece stored before the failure is kept: an upload resumes from it');
  await until(() => hub.blobs.pieces.used === 0, 'the budget given back');
});

test('issue 20 / PROTOCOL §8.11 (GET follows): a change that comes while a download is busy is heard at its next look, not after the poll', async (t) => {
  const hub = await hubFor(t);
  const cid = cidOf(Buffer.from('x'));
  const follow = hub.blobs.follow(cid);
  t.teardown(() => follow.close());
  const piece: StoredPiece = { created: 1, at: 0, parts: [Buffer.from('abc')] };
  // Stored while the download was sending: nobody waiting.
  hub.blobs.moved(cid, piece);
  hub.blobs.moved(cid);
  const woke = await Promise.race([follow.wait(60_000).then(() => 'woke'), new Promise((r) => setTimeout(() => r('slept'), 2000))]);
  t.is(woke, 'woke', 'the wait ends at once: a change came since the last look');
  t.is(follow.take(), piece, 'the last piece stored, kept past a change with none (the blob completed)');
  const idleWait = follow.wait(60_000);
  const idle = await Promise.race([idleWait.then(() => 'woke'), new Promise((r) => setTimeout(() => r('slept'), 300))]);
  t.is(idle, 'slept', 'with no change since the last look, the wait waits');
  // One waiter at a time: a new wait ends the one before (its timer with it). A wait under way is woken by
  // the next change, and a closed follow wakes its waiter and is told no more.
  const waiting = follow.wait(60_000);
  await idleWait;
  hub.blobs.moved(cid);
  await waiting;
  t.is(follow.take(), undefined);
  const last = follow.wait(60_000);
  follow.close();
  await last;
  hub.blobs.moved(cid, piece);
  t.is(follow.take(), undefined, 'a closed follow hears nothing');
});

test('issue 20 / PROTOCOL §8.11 (GET follows): a piece stored into another record of the same address (deleted, never checked) is not sent to a download of this one', async (t) => {
  const hub = await hubFor(t);
  const bytes = randomBytes(2 * MIB + 5);
  const cid = cidOf(bytes);
  // The upload begins the record (headers only, no byte yet).
  const { req, answer } = putting(hub.url, cid, bytes.length, 0, bytes.length);
  req.flushHeaders();
  await until(async () => (await hub.storage.blobs.status(cid)) !== undefined, 'the blob begun');
  const record = (await hub.storage.blobs.status(cid))!;
  // A download follows it; the test learns when it waits for a change.
  const follow = hub.blobs.follow.bind(hub.blobs);
  let waits!: () => void;
  const waiting = new Promise<void>((resolve) => (waits = resolve));
  hub.blobs.follow = (c: string): Follow => {
    const f = follow(c);
    const wait = f.wait.bind(f);
    f.wait = (ms: number) => {
      waits();
      return wait(ms);
    };
    return f;
  };
  const got = new Promise<Buffer>((resolve, reject) => {
    request(`${hub.url}/blobs/${cid}`, (res) => void collect(res).then((a) => resolve(a.body), reject))
      .on('error', reject)
      .end();
  });
  await waiting;
  // A piece at the download's offset, as an upload into an earlier record of this address would tell it.
  hub.blobs.moved(cid, { created: record.created - 1, at: 0, parts: [Buffer.alloc(MIB, 0x41)] });
  req.end(bytes);
  t.is((await answer).status, 200);
  t.true((await got).equals(bytes), 'the download has exactly the blob, none of the other record bytes');
});
