// SPEC §11 (the relay), PROTOCOL §8.5 (kept, pushed, answered) and §8.7 (push stream): an envelope to a node whose stream is open on the hub is pushed
// once the mailbox has decided to keep it, without waiting for its write to land; the sender is answered
// only after that write. Alone in its file: the test fills libuv's thread pool, which LevelDB's writes
// use, so that no write can land until the pool frees — a push that waited for its write would come
// after that, one that did not comes before. (Other tests in the same process would stall on the pool.)
import test from 'ava';
import { pbkdf2, pbkdf2Sync } from 'node:crypto';
import { get as httpGet, createServer, type IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { Level } from 'level';
import { Relay } from '../src/hub/relay.js';
import { LevelMailbox } from '../src/hub/storage/level-mailbox.js';
import { createIdentity } from '../src/identity/store.js';
import { envelopeTo } from './helpers/envelopes.js';
import { tempDir } from './helpers/tmp.js';
import { until } from './helpers/wait.js';

/** The frames of a push stream (4-byte length, then the envelope), as hex of their bytes. */
function framesOf(response: IncomingMessage): string[] {
  const frames: string[] = [];
  let buffered = Buffer.alloc(0);
  response.on('data', (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    while (buffered.length >= 4 && buffered.length >= 4 + buffered.readUInt32BE(0)) {
      frames.push(buffered.subarray(4, 4 + buffered.readUInt32BE(0)).toString('hex'));
      buffered = buffered.subarray(4 + buffered.readUInt32BE(0));
    }
  });
  return frames;
}

/**
 * Occupies every thread of libuv's pool with a key derivation of about `ms` each; resolves when the
 * first of them ends (from then on the pool runs other work again).
 */
function fillThreadPool(ms: number): Promise<void> {
  const threads = Number(process.env.UV_THREADPOOL_SIZE ?? 4);
  const start = performance.now();
  pbkdf2Sync('x', 'y', 10_000, 32, 'sha256');
  const iterations = Math.ceil((10_000 * ms) / Math.max(1, performance.now() - start));
  const jobs = Array.from(
    { length: threads },
    () => new Promise<void>((resolve, reject) => pbkdf2('x', 'y', iterations, 32, 'sha256', (err) => (err ? reject(err) : resolve()))),
  );
  return Promise.race(jobs);
}

test('SPEC §11: an envelope to a node on this hub is pushed before its mailbox write lands; the sender is answered after it', async (t) => {
  t.timeout(60_000);
  const root = await tempDir(t, 'anet-early-push-');
  const [alice, bob] = [await createIdentity(join(root, 'alice'), Date.now()), await createIdentity(join(root, 'bob'), Date.now())];
  const db = new Level<string, unknown>(join(root, 'mail'));
  await db.open();
  t.teardown(() => db.close());
  const relay = new Relay(Date.now, undefined, { mailbox: new LevelMailbox(db), agents: { isRecipient: async () => true } });
  t.teardown(() => relay.close());
  const server = createServer((req, res) => relay.attach(bob.aid, req, res, true));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => server.close());
  const response = await new Promise<IncomingMessage>((r) =>
    httpGet({ host: '127.0.0.1', port: (server.address() as { port: number }).port }, r),
  );
  t.teardown(() => response.destroy());
  const frames = framesOf(response);

  // First one envelope with the pool free: the mailbox is loaded and the stream's first flush is done.
  const first = envelopeTo(alice, bob, 'first');
  t.is(await relay.accept(first), 'delivered');
  await until(() => frames.length === 1, 'the first push');
  await relay.flush(bob.aid);

  // Now no LevelDB write can land until the pool frees.
  let poolFree = false;
  const freed = fillThreadPool(1500).then(() => (poolFree = true));
  const second = envelopeTo(alice, bob, 'second');
  let answeredWhilePoolBusy: boolean | undefined;
  const answered = relay.accept(second).then((outcome) => {
    answeredWhilePoolBusy = !poolFree;
    return outcome;
  });
  await until(() => frames.length === 2 || poolFree, 'the second push, or the pool freed', 3000);
  t.is(frames.length, 2, 'the envelope was pushed while its mailbox write could not land');
  t.false(poolFree, 'the push came before the pool freed');
  t.is(frames[1], Buffer.from(second).toString('hex'));
  t.is(answeredWhilePoolBusy, undefined, 'the sender is not answered before the write lands');

  await freed;
  t.is(await answered, 'delivered');
  t.false(answeredWhilePoolBusy);
  // Kept as well as pushed (an ack would delete it), and a later flush does not push it again.
  t.deepEqual(
    (await new LevelMailbox(db).list(bob.aid, Date.now())).map((m) => Buffer.from(m.bytes).toString('hex')),
    [first, second].map((b) => Buffer.from(b).toString('hex')),
  );
  await relay.flush(bob.aid);
  await new Promise((r) => setTimeout(r, 100));
  t.is(frames.length, 2, 'each envelope pushed once');
});
