// SPEC §11 (the hub's relay queues for offline nodes, bounded, with a TTL), WIRE §4 (the hub sees only the
// recipient and a padded size; the receiver's replay guard) and issue 19's durable mailboxes: every
// envelope the hub accepts is kept (LevelDB here, PostgreSQL in the other backend's run) until its
// recipient acknowledges it after journaling it, or for the mailbox TTL (7 days); a node that crashes
// between receiving and journaling gets it again and handles it once; an older node's stream (no
// `x-anet-ack`) still has each envelope deleted once pushed; the bounds answer QUEUE_FULL; the hub's
// data dir never holds a plaintext byte or the sender. Real hubs and daemons on loopback, the test clock.
import test, { type ExecutionContext } from 'ava';
import { createServer, request } from 'node:http';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Level } from 'level';
import { startNet, rawPeer, type Net } from './helpers/net.js';
import { startTestHub, onLevelDb } from './helpers/hub.js';
import { childDaemon } from './helpers/proc.js';
import { runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { until } from './helpers/wait.js';
import type { Hub } from '../src/hub/server.js';
import { LevelMailbox } from '../src/hub/storage/level-mailbox.js';
import { HubClient, HubRefusedError } from '../src/hub-client/client.js';
import { RelayClient } from '../src/relay/client.js';
import { ReplayGuard } from '../src/relay/replay-guard.js';
import { currentKeys, signKeySet } from '../src/relay/keyset.js';
import { sealEnvelope } from '../src/protocol/envelope.js';
import { generateX25519 } from '../src/protocol/hpke.js';
import { ACK_HEADER, frame, mailId } from '../src/protocol/relay.js';
import { signRequest } from '../src/protocol/hub-auth.js';
import { toBody } from '../src/protocol/body.js';
import { TASK_SEND, TASK_RESULT } from '../src/protocol/messages.js';
import { createIdentity, type Identity } from '../src/identity/store.js';
import { pricedProvider } from './helpers/payments.js';
import { Store } from '../store/db.js';
import { DEFAULT_LIMITS, type RelayLimits } from '../src/hub/relay.js';

const DAY = 24 * 3_600_000;

/** A hub and two registered AIDs with encryption keys published (the hub keeps mail for such only). */
async function hubWith(t: ExecutionContext, opts: { now?: () => number; limits?: Partial<RelayLimits>; names?: string[] } = {}) {
  const root = await tempDir(t);
  const hub = await startTestHub({
    dataDir: join(root, 'hub'),
    port: 0,
    ...(opts.now ? { now: opts.now } : {}),
    limits: opts.limits ?? {},
  });
  t.teardown(() => hub.close());
  const ids: Identity[] = [];
  for (const name of opts.names ?? ['alice', 'bob']) {
    const id = await createIdentity(join(root, name), Date.now());
    const client = new HubClient(hub.url, id, opts.now);
    await client.register(name, null);
    await client.putKeys(signKeySet(id, (await currentKeys(join(root, name), Date.now())).keys));
    ids.push(id);
  }
  return { root, hub, ids };
}

const key = generateX25519();
const kid = new Uint8Array(16).fill(1);
/** A sealed envelope (the hub never opens one: a test key will do). */
function envelopeTo(from: Identity, to: string, body: string, pad = 0) {
  return sealEnvelope(
    { aid: from.aid, ksn: from.kel.ksn, signer: from.signer },
    { aid: to, kid, publicKey: key.publicKey },
    { type: 'test', ix: 0, ts: Date.now(), exp: Date.now() + 60_000, body: body + 'x'.repeat(pad) },
  ).bytes;
}

/** The ids of what the hub keeps for `aid` now. */
const kept = async (hub: Hub, aid: string, now = Date.now()) => (await hub.storage.mailbox.list(aid, now)).map((m) => m.id);

/** Every file under `dir`. */
async function files(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...(await files(p)));
    else out.push(p);
  }
  return out;
}

/** The hub restarted on its data dir and port, on the test clock (the daemons' relay clients reconnect). */
async function restartHub(t: ExecutionContext, net: Net, hub: Hub): Promise<Hub> {
  await hub.close();
  const again = await startTestHub({ dataDir: join(net.root, 'hub'), port: Number(new URL(hub.url).port), now: () => net.clock.now() });
  t.teardown(() => again.close());
  return again;
}

test('issue 19, SPEC §9.2, §11: a node offline for 3 days gets the text task sent while it was away, after a hub restart', async (t) => {
  const net = await startNet(t);
  const p = await net.node('p', { inbound: { policy: 'open' } });
  const c = await net.node('c');
  const provider = await net.start(p.dir);
  const caller = await net.start(c.dir);
  await provider.close();
  // Sent while the provider is offline: the hub keeps it (the caller then stops too: no resend muddles it).
  const marker = `MARKER-offline-${randomBytes(4).toString('hex')}`;
  const sent = await caller.node.caller.send(p.aid, marker, 50);
  t.is(sent.state, 'submitted');
  t.is((await kept(net.hub, p.aid, net.clock.now())).length, 1, 'kept in the mailbox');
  await caller.close();
  net.clock.advance(3 * DAY);
  const hub = await restartHub(t, net, net.hub);
  t.is((await kept(hub, p.aid, net.clock.now())).length, 1, 'still kept after the restart, 3 days on');
  await net.start(p.dir);
  let inbox: { task: string; from: string; text: string }[] = [];
  await until(async () => {
    inbox = JSON.parse((await runCli(['inbox', '--data', p.dir, '--json'])).stdout || '[]');
    return inbox.length > 0;
  }, 'the text task in the inbox');
  t.like(inbox, [{ task: sent.task, from: c.aid, text: marker }]);
  // Acknowledged once journaled: the hub lets it go.
  await until(async () => (await kept(hub, p.aid, net.clock.now())).length === 0, 'the mailbox emptied by the ack');
  t.is(hub.relay.stats.acked, 1);
});

test('issue 19, SPEC §9, §13: a provider killed between receiving a task and journaling it gets it again after its restart and runs it once', async (t) => {
  const net = await startNet(t);
  const p = await pricedProvider(t, net, [{ id: 'demo.echo' }]);
  // The caller is a bare peer: it never sends the task again, so only the hub's mailbox can bring it back.
  const x = await rawPeer(t, net, 'x');
  const first = await childDaemon(t, p.dir, 'after-deliver');
  const task = '00000000000000a1';
  await x.messenger.send(p.aid, TASK_SEND, toBody({ task, capability: 'demo.echo', args: '{"n":1}' }), { ttlMs: 60_000 });
  t.is(await first.exited, -1, 'killed at the crash point: the task taken from the relay, nothing journaled');
  t.is((await kept(net.hub, p.aid, net.clock.now())).length, 1, 'not acknowledged: the hub still keeps it');
  t.is(p.ran(), 0);
  // Its mid was taken in memory only: a mid is written once its message's handling is durable.
  const store = await Store.open(p.dir);
  const mids = (await store.mids.keys().all()).filter((k) => !k.startsWith('~'));
  await store.close();
  t.deepEqual(mids, [], 'no mid on disk for a message whose handling never became durable');
  await childDaemon(t, p.dir);
  await until(() => x.received.some((r) => r.type === TASK_RESULT), 'the result at the caller');
  t.like(x.received.find((r) => r.type === TASK_RESULT)?.body, { task, state: 'completed' });
  t.is(p.ran(), 1, 'run once');
  await until(async () => (await kept(net.hub, p.aid, net.clock.now())).length === 0, 'acknowledged once journaled');
  // The same envelope pushed once more (a stream reopened before an ack landed) is dropped by the replay
  // guard: here, the caller sends nothing new and the provider answers nothing more.
  t.is(x.received.filter((r) => r.type === TASK_RESULT).length, 1);
});

test('issue 19, SPEC §11: acknowledged envelopes leave the store; unacknowledged ones are pushed again on the next stream and kept until the TTL', async (t) => {
  let now = Date.now();
  const { hub, ids } = await hubWith(t, { now: () => now });
  const [alice, bob] = ids as [Identity, Identity];
  const sender = new RelayClient(hub.url, alice, () => {});
  t.teardown(() => sender.close());
  const envelopes = [0, 1, 2].map((i) => envelopeTo(alice, bob.aid, `m${i}`));
  for (const e of envelopes) t.is(await sender.send(e), 'queued');
  const got: string[] = [];
  const bobRelay = new RelayClient(
    hub.url,
    bob,
    (_bytes, id) => got.push(id),
    () => now,
  );
  await bobRelay.connect();
  await until(() => got.length === 3, 'three pushed');
  t.deepEqual(got, envelopes.map(mailId), 'oldest first, each with its mail id');
  bobRelay.ack(got[0]!);
  await bobRelay.flushAcks();
  t.deepEqual(await kept(hub, bob.aid, now), [got[1], got[2]], 'the acknowledged one left');
  await bobRelay.close();
  // Two were pushed and never acknowledged (the node crashed before journaling them): pushed again.
  const again: string[] = [];
  const bob2 = new RelayClient(
    hub.url,
    bob,
    (_bytes, id) => again.push(id),
    () => now,
  );
  t.teardown(() => bob2.close());
  await bob2.connect();
  await until(() => again.length === 2, 'the two unacknowledged ones again');
  t.deepEqual(again, [got[1], got[2]]);
  await bob2.close();
  now += DEFAULT_LIMITS.ttlMs - 60_000;
  t.is((await kept(hub, bob.aid, now)).length, 2, 'kept a minute before the mailbox TTL');
  now += 120_000;
  t.is((await kept(hub, bob.aid, now)).length, 0, 'gone past it');
  t.is(await hub.storage.mailbox.sweep(now), 2, 'and swept from the store');
  t.deepEqual(await hub.storage.mailbox.size(), { envelopes: 0, bytes: 0 });
});

/** A signed GET /relay/v2/stream of `id`, as an older node opens it (no ack header): the frames it gets. */
function oldStream(t: ExecutionContext, url: string, id: Identity, ack = false) {
  const got: Uint8Array[] = [];
  const headers = signRequest(id.signer, id.aid, 'GET', '/relay/v2/stream', new Uint8Array(), Date.now());
  const u = new URL(url);
  const opened = new Promise<void>((resolve, reject) => {
    const req = request(
      { host: u.hostname, port: u.port, path: '/relay/v2/stream', headers: { ...headers, ...(ack ? { [ACK_HEADER]: '1' } : {}) } },
      (res) => {
        if (res.statusCode !== 200) return reject(new Error(`stream refused: ${res.statusCode}`));
        let buf = Buffer.alloc(0);
        res.on('data', (chunk: Buffer) => {
          buf = Buffer.concat([buf, chunk]);
          while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
            got.push(new Uint8Array(buf.subarray(4, 4 + buf.readUInt32BE(0))));
            buf = buf.subarray(4 + buf.readUInt32BE(0));
          }
        });
        resolve();
      },
    );
    req.on('error', () => {});
    req.end();
    t.teardown(() => req.destroy());
  });
  return { got, opened };
}

test('issue 19, SPEC §11: a stream opened without x-anet-ack (an older node) has each envelope deleted once pushed', async (t) => {
  const { hub, ids } = await hubWith(t);
  const [alice, bob] = ids as [Identity, Identity];
  const sender = new RelayClient(hub.url, alice, () => {});
  t.teardown(() => sender.close());
  const queued = envelopeTo(alice, bob.aid, 'waiting');
  t.is(await sender.send(queued), 'queued');
  const stream = oldStream(t, hub.url, bob);
  await stream.opened;
  await until(() => stream.got.length === 1, 'the kept one pushed at attach');
  const live = envelopeTo(alice, bob.aid, 'live');
  t.is(await sender.send(live), 'delivered');
  await until(() => stream.got.length === 2, 'the live one pushed');
  t.deepEqual(stream.got.map(mailId), [mailId(queued), mailId(live)]);
  await until(async () => (await kept(hub, bob.aid)).length === 0, 'both deleted once pushed');
  t.is(hub.relay.stats.acked, 2);
  // The ack route answers a node that has nothing kept with 0 (ids not held are ignored), signed only.
  const body = Buffer.from(JSON.stringify({ ids: [mailId(live)] }));
  const res = await fetch(`${hub.url}/relay/v2/ack`, {
    method: 'POST',
    headers: signRequest(bob.signer, bob.aid, 'POST', '/relay/v2/ack', body, Date.now()) as unknown as Record<string, string>,
    body,
  });
  t.is(res.status, 200);
  t.deepEqual(await res.json(), { acked: 0, blobs: 0 }, 'blobs: none named (PROTOCOL §8.11)');
  const unsigned = await fetch(`${hub.url}/relay/v2/ack`, { method: 'POST', headers: { 'x-anet-aid': bob.aid }, body });
  t.is(unsigned.status, 401);
});

test('issue 19, SPEC §11: the mailbox bounds per recipient and in all answer QUEUE_FULL (429); other recipients are unaffected', async (t) => {
  const one = 1024;
  const { hub, ids } = await hubWith(t, {
    limits: { perRecipient: 2, perRecipientBytes: 10 * one, totalBytes: 3 * one + 512 },
    names: ['alice', 'bob', 'carol'],
  });
  const [alice, bob, carol] = ids as [Identity, Identity, Identity];
  const sender = new RelayClient(hub.url, alice, () => {});
  t.teardown(() => sender.close());
  const outcome = (p: Promise<string>) => p.catch((err) => (err instanceof HubRefusedError ? `${err.status} ${err.code}` : String(err)));
  // Envelopes pad to powers of two: a ~600-byte body makes a 1 KiB message.
  const e = (to: Identity, i: number) => envelopeTo(alice, to.aid, `n${i}`, 600);
  t.true(e(bob, 0).length > one && e(bob, 0).length < one + 512);
  t.is(await outcome(sender.send(e(bob, 0))), 'queued');
  t.is(await outcome(sender.send(e(bob, 1))), 'queued');
  t.is(await outcome(sender.send(e(bob, 2))), '429 QUEUE_FULL', 'two per recipient');
  t.is(await outcome(sender.send(e(carol, 3))), 'queued', 'another recipient has its own count');
  t.is(await outcome(sender.send(e(carol, 4))), '429 QUEUE_FULL', 'the bytes in all are used up');
  t.is((await hub.storage.mailbox.size()).envelopes, 3);
  t.is(hub.relay.stats.dropped, 2);
  // An ack makes room again.
  const bobRelay = new RelayClient(hub.url, bob, (_bytes, id) => bobRelay.ack(id));
  t.teardown(() => bobRelay.close());
  await bobRelay.connect();
  await until(async () => (await kept(hub, bob.aid)).length === 0, "bob's mail acknowledged");
  t.is(await outcome(sender.send(e(carol, 5))), 'queued');
});

test('issue 19, WIRE §4: the hub keeps envelopes on disk, but never a plaintext byte of them nor who sent them', async (t) => {
  const { hub, ids, root } = await hubWith(t, { names: ['bob'] });
  const [bob] = ids as [Identity];
  // The sender is not even registered here: sends are anonymous, and its AID is only inside the ciphertext.
  const alice = await createIdentity(join(root, 'alice'), Date.now());
  const sender = new RelayClient(hub.url, alice, () => {});
  t.teardown(() => sender.close());
  const marker = `MARKER-mailbox-${randomBytes(4).toString('hex')}`;
  const sent: Uint8Array[] = [];
  for (let i = 0; i < 5; i++) {
    const env = envelopeTo(alice, bob.aid, marker);
    sent.push(env);
    t.is(await sender.send(env), 'queued');
  }
  t.is((await hub.storage.mailbox.size()).envelopes, 5, 'kept');
  await hub.close();
  if (!onLevelDb) return t.pass('the PostgreSQL run keeps them in its database; the test of its bytes is the LevelDB run');
  let found = 0;
  for (const f of await files(join(root, 'hub'))) {
    const content = await readFile(f);
    t.false(content.includes(Buffer.from(marker)), `${f} holds a message body`);
    t.false(content.includes(Buffer.from(alice.aid)), `${f} names the sender`);
    for (const e of sent) if (content.includes(Buffer.from(e.subarray(e.length - 48)))) found++;
  }
  t.is(found, 5, 'the sealed envelopes are on disk (what makes them survive a restart)');
});

// ---- The parts alone: the LevelDB mailbox and the replay guard's bound ----

test('issue 19: LevelMailbox keeps one copy per id, checks its bounds, acks, sweeps, and counts again after a restart', async (t) => {
  const dir = await tempDir(t);
  let db = new Level<string, unknown>(dir);
  await db.open();
  t.teardown(() => db.close());
  let box = new LevelMailbox(db);
  const limits = { perRecipient: 2, perRecipientBytes: 1000, totalBytes: 1500 };
  const bytes = (n: number) => new Uint8Array(n).fill(7);
  t.is(await box.put('A', 'a1', bytes(300), 100, limits), 'kept');
  t.is(await box.put('A', 'a1', bytes(300), 200, limits), 'kept', 'the same id again: one copy, kept as long as either asks');
  t.is(await box.put('A', 'a2', bytes(300), 100, limits), 'kept');
  t.is(await box.put('A', 'a3', bytes(10), 100, limits), 'full', 'two per recipient');
  t.is(await box.put('B', 'b1', bytes(800), 100, limits), 'kept');
  t.is(await box.put('C', 'c1', bytes(500), 100, limits), 'full', '1500 bytes in all');
  // Racing puts for one recipient pass its bound by none.
  const raced = await Promise.all(['x1', 'x2', 'x3', 'x4'].map((id) => box.put('D', id, bytes(10), 100, limits)));
  t.is(raced.filter((r) => r === 'kept').length, 2);
  t.deepEqual(await box.size(), { envelopes: 5, bytes: 1420 });
  t.deepEqual(
    (await box.list('A', 0)).map((m) => m.id),
    ['a1', 'a2'],
  );
  t.is(await box.ack('A', ['a2', 'unknown']), 1);
  t.is(await box.sweep(150), 3, 'b1 and the two of D expired; a1 was kept until 200');
  t.deepEqual(
    (await box.list('A', 0)).map((m) => m.id),
    ['a1'],
  );
  await db.close();
  db = new Level<string, unknown>(dir);
  await db.open();
  box = new LevelMailbox(db);
  t.deepEqual(await box.size(), { envelopes: 1, bytes: 300 }, 'counted again from the store');
  t.is(await box.sweep(200), 1);
  t.deepEqual(await box.size(), { envelopes: 0, bytes: 0 });
});

test('issue 19, WIRE §4: a mid taken while its handling was under way is forgotten at the next start; one whose handling was committed is not', async (t) => {
  const dir = await tempDir(t);
  let store = await Store.open(dir);
  t.teardown(() => store.close());
  let guard = new ReplayGuard(store);
  await guard.recover();
  const now = Date.now();
  const [cut, handled] = [randomBytes(16), randomBytes(16)];
  t.false(await guard.seen(cut, now + 60_000, now));
  t.false(await guard.seen(handled, now + 60_000, now));
  guard.done(handled);
  await guard.commit();
  t.true(await guard.seen(cut, now + 60_000, now), 'a copy while running is a replay');
  await store.close();
  store = await Store.open(dir);
  guard = new ReplayGuard(store);
  t.is(await guard.recover(), 0, 'no pending marks: a mid is written only once its handling is done');
  t.false(await guard.seen(cut, now + 60_000, now), 'the cut one is taken again');
  t.true(await guard.seen(handled, now + 60_000, now), 'the handled one stays a replay');
});

test('issue 19, WIRE §4: past its bound the replay guard forgets the oldest-sent mids and refuses anything sent at or before them, also after a restart', async (t) => {
  const dir = await tempDir(t);
  let store = await Store.open(dir);
  t.teardown(() => store.close());
  let guard = new ReplayGuard(store, { bound: 100 });
  await guard.recover();
  const t0 = Date.now();
  const mids = Array.from({ length: 101 }, () => randomBytes(16));
  // Sent one millisecond apart, each living a week.
  for (let i = 0; i < mids.length; i++) {
    t.false(await guard.seen(mids[i]!, t0 + 7 * DAY, t0 + i));
    guard.done(mids[i]!);
  }
  // Written (and counted) by the commit before the acknowledgements.
  await guard.commit();
  // The 101st passed the bound: the oldest (plus 1% slack: 2) are forgotten, the floor is the second's ts.
  await until(async () => (await store.mids.get(Buffer.from(mids[0]!).toString('hex'))) === undefined, 'the oldest forgotten');
  t.true(await guard.seen(mids[0]!, t0 + 7 * DAY, t0), 'a replay of a forgotten mid is still refused (by the floor)');
  t.true(await guard.seen(randomBytes(16), t0 + 7 * DAY, t0 + 1), 'a new message sent at the floor is refused too');
  t.false(await guard.seen(randomBytes(16), t0 + 7 * DAY, t0 + 2), 'one sent after it is taken');
  t.true(await guard.seen(mids[50]!, t0 + 7 * DAY, t0 + 50), 'mids within the bound are kept');
  await store.close();
  store = await Store.open(dir);
  guard = new ReplayGuard(store, { bound: 100 });
  await guard.recover();
  t.true(await guard.seen(mids[1]!, t0 + 7 * DAY, t0 + 1), 'the floor survives a restart');
});

test('issue 19: an envelope over the upstream limit is kept and pushed like any other (POSTed, then streamed)', async (t) => {
  const { hub, ids } = await hubWith(t);
  const [alice, bob] = ids as [Identity, Identity];
  const sender = new RelayClient(hub.url, alice, () => {});
  t.teardown(() => sender.close());
  const big = envelopeTo(alice, bob.aid, 'big', 300 * 1024);
  t.is(await sender.send(big), 'queued');
  const stream = oldStream(t, hub.url, bob, true);
  await stream.opened;
  await until(() => stream.got.length === 1, 'pushed at attach');
  t.deepEqual(frame(stream.got[0]!), frame(big));
  t.deepEqual(await kept(hub, bob.aid), [mailId(big)], 'kept until acknowledged (x-anet-ack: 1)');
});

test('issue 19, SPEC §11: a node on a hub from before acknowledgements (404 NOT_FOUND on the ack route) stops acknowledging, quietly', async (t) => {
  const root = await tempDir(t);
  const me = await createIdentity(join(root, 'me'), Date.now());
  const asked: string[] = [];
  const old = createServer((req, res) => {
    asked.push(`${req.method} ${req.url}`);
    req.resume();
    res
      .writeHead(404, { 'content-type': 'application/json' })
      .end(JSON.stringify({ error: { code: 'NOT_FOUND', message: `no route ${req.method} ${req.url}` } }));
  });
  await new Promise<void>((r) => old.listen(0, '127.0.0.1', r));
  t.teardown(() => old.close());
  const lines: string[] = [];
  const client = new RelayClient(`http://127.0.0.1:${(old.address() as { port: number }).port}`, me, () => {});
  client.log = (l) => lines.push(l);
  t.teardown(() => client.close());
  client.ack('a'.repeat(64));
  await client.flushAcks();
  t.deepEqual(asked, ['POST /relay/v2/ack']);
  client.ack('b'.repeat(64));
  await client.flushAcks();
  t.deepEqual(asked, ['POST /relay/v2/ack'], 'not asked again');
  t.deepEqual(lines, [], 'and nothing logged');
});

test('issue 19, SPEC §11: a message whose handler fails is not acknowledged and comes again on the next stream; failing twice, it is let go', async (t) => {
  const net = await startNet(t);
  const p = await rawPeer(t, net, 'p');
  const x = await rawPeer(t, net, 'x');
  let runs = 0;
  p.messenger.on('test.fails', () => {
    runs++;
    throw new Error('this handler always fails');
  });
  await x.messenger.send(p.aid, 'test.fails', toBody({ n: 1 }));
  await until(() => runs === 1, 'the first run');
  t.is((await kept(net.hub, p.aid, net.clock.now())).length, 1, 'not acknowledged: still kept');
  // The hub restarts: p's stream opens again and the hub pushes what p has not acknowledged.
  const hub = await restartHub(t, net, net.hub);
  await until(() => runs === 2, 'the second run, from the next stream');
  await until(async () => (await kept(hub, p.aid, net.clock.now())).length === 0, 'let go after failing twice');
  t.is(p.messenger.stats.refused.HANDLER_FAILED, 1);
  t.is(runs, 2);
});

test("issue 19, SPEC §11: a sender's share of kept bytes is given back once its envelope is pushed, not at the ack (which may reach another replica)", async (t) => {
  const { hub, ids } = await hubWith(t);
  const [alice, bob] = ids as [Identity, Identity];
  const got: string[] = [];
  const bobRelay = new RelayClient(hub.url, bob, (_bytes, id) => got.push(id));
  await bobRelay.connect();
  t.teardown(() => bobRelay.close());
  const sender = new RelayClient(hub.url, alice, () => {});
  t.teardown(() => sender.close());
  t.is(await sender.send(envelopeTo(alice, bob.aid, 'online')), 'delivered');
  await until(() => got.length === 1, 'pushed');
  t.is(hub.relay.queuedBytes(), 0, 'no share held for mail on its recipient stream');
  t.is((await kept(hub, bob.aid, Date.now())).length, 1, 'still kept until bob acknowledges it');
});
