// Issue 20, PROTOCOL §8.11 (GET /blobs/<cid>): how a hub moves a blob along. A download following an
// upload hears every change, also one that came while it was busy sending. Real hubs on the test's backend.
import test from 'ava';
import { join } from 'node:path';
import type { Hub } from '../src/hub/server.js';
import type { StoredPiece } from '../src/hub/blobs.js';
import { startTestHub } from './helpers/hub.js';
import { tempDir } from './helpers/tmp.js';
import { cidOf } from './helpers/blob-http.js';

async function hubFor(t: Parameters<typeof tempDir>[0]): Promise<Hub> {
  const root = await tempDir(t, 'anet-hub-blob-pipeline-');
  const hub = await startTestHub({ dataDir: join(root, 'hub'), port: 0 });
  t.teardown(() => hub.close());
  return hub;
}

test('issue 20 / PROTOCOL §8.11 (GET follows): a change that comes while a download is busy is heard at its next look, not after the poll', async (t) => {
  const hub = await hubFor(t);
  const cid = cidOf(Buffer.from('x'));
  const follow = hub.blobs.follow(cid);
  t.teardown(() => follow.close());
  const piece: StoredPiece = { at: 0, parts: [Buffer.from('abc')] };
  // Stored while the download was sending: nobody waiting.
  hub.blobs.moved(cid, piece);
  hub.blobs.moved(cid);
  const woke = await Promise.race([follow.wait(60_000).then(() => 'woke'), new Promise((r) => setTimeout(() => r('slept'), 2000))]);
  t.is(woke, 'woke', 'the wait ends at once: a change came since the last look');
  t.is(follow.take(), piece, 'the last piece stored, kept past a change with none (the blob completed)');
  const idle = await Promise.race([follow.wait(60_000).then(() => 'woke'), new Promise((r) => setTimeout(() => r('slept'), 300))]);
  t.is(idle, 'slept', 'with no change since the last look, the wait waits');
  // A wait under way is woken by the next change, and a closed follow wakes its waiter and is told no more.
  const waiting = follow.wait(60_000);
  hub.blobs.moved(cid);
  await waiting;
  t.is(follow.take(), undefined);
  const last = follow.wait(60_000);
  follow.close();
  await last;
  hub.blobs.moved(cid, piece);
  t.is(follow.take(), undefined, 'a closed follow hears nothing');
});
