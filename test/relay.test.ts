// SPEC §11 / WIRE §4: the hub relay pushes envelopes to connected nodes, keeps them (bounded, with a
// TTL, until acknowledged: issue 19, test/mailbox.test.ts) for offline ones, needs a signed stream to
// receive, and never writes who talked to whom.
import test, { type ExecutionContext } from 'ava';
import { once } from 'node:events';
import { readdir, readFile, stat } from 'node:fs/promises';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { tempDir } from './helpers/tmp.js';
import { until } from './helpers/wait.js';
import { startNet } from './helpers/net.js';
import { startTestHub } from './helpers/hub.js';
import { HubClient, HubRefusedError } from '../src/hub-client/client.js';
import { RelayClient } from '../src/relay/client.js';
import { sealEnvelope, openEnvelope } from '../src/protocol/envelope.js';
import { generateX25519 } from '../src/protocol/hpke.js';
import { currentKeys, signKeySet } from '../src/relay/keyset.js';
import { createIdentity, type Identity } from '../src/identity/store.js';
import { DEFAULT_LIMITS } from '../src/hub/relay.js';
import { frame } from '../src/protocol/relay.js';

async function setup(t: ExecutionContext, now?: () => number) {
  const root = await tempDir(t);
  const hub = await startTestHub({ dataDir: join(root, 'hub'), port: 0, ...(now ? { now } : {}) });
  t.teardown(() => hub.close());
  // Registered with encryption keys published, as a daemon leaves a node: the hub queues only for such.
  const mk = async (name: string) => {
    const id = await createIdentity(join(root, name), Date.now());
    const client = new HubClient(hub.url, id);
    await client.register(name, null);
    await client.putKeys(signKeySet(id, (await currentKeys(join(root, name), Date.now())).keys));
    return id;
  };
  return { root, hub, alice: await mk('alice'), bob: await mk('bob') };
}

const key = generateX25519();
const kid = new Uint8Array(16).fill(1);
function envelopeTo(from: Identity, to: Identity, body: string) {
  return sealEnvelope(
    { aid: from.aid, ksn: from.kel.ksn, signer: from.signer },
    { aid: to.aid, kid, publicKey: key.publicKey },
    { type: 'test', ix: 0, ts: Date.now(), exp: Date.now() + 60_000, body },
  ).bytes;
}

function inbox() {
  const got: Uint8Array[] = [];
  let wake: (() => void) | null = null;
  return {
    got,
    push: (b: Uint8Array) => {
      got.push(b);
      wake?.();
    },
    next: (n: number) =>
      new Promise<void>((resolve) => {
        const check = () => {
          if (got.length >= n) resolve();
          else wake = check;
        };
        check();
      }),
  };
}

test('SPEC §11: an envelope to a connected node is pushed at once and opens end to end', async (t) => {
  const { hub, alice, bob } = await setup(t);
  const box = inbox();
  const bobRelay = new RelayClient(hub.url, bob, box.push);
  await bobRelay.connect();
  t.teardown(() => bobRelay.close());
  const aliceRelay = new RelayClient(hub.url, alice, () => {});
  t.teardown(() => aliceRelay.close());
  t.is(await aliceRelay.send(envelopeTo(alice, bob, 'hi bob')), 'delivered');
  await box.next(1);
  const opened = await openEnvelope(box.got[0]!, {
    me: bob.aid,
    keys: new Map([[Buffer.from(kid).toString('hex'), key]]),
    now: Date.now(),
    seen: () => false,
    kelOf: (aid) => (aid === alice.aid ? alice.kel : null),
  });
  t.like(opened, { from: alice.aid, body: 'hi bob' });
});

test('SPEC §11: an offline node gets its queue on connect; the queue is bounded and expires', async (t) => {
  let now = Date.now();
  const { hub, alice, bob } = await setup(t, () => now);
  // The hub's side of each push stream bob opens.
  const streams: ServerResponse[] = [];
  hub.server.prependListener('request', (req, res) => void (req.url === '/relay/v2/stream' && streams.push(res)));
  const sender = new RelayClient(hub.url, alice, () => {});
  t.teardown(() => sender.close());
  t.is(await sender.send(envelopeTo(alice, bob, 'one')), 'queued');
  t.is(await sender.send(envelopeTo(alice, bob, 'two')), 'queued');
  const box = inbox();
  // Bob acknowledges what it got (the hub keeps an envelope until then).
  const bobRelay: RelayClient = new RelayClient(hub.url, bob, (b, id) => {
    box.push(b);
    bobRelay.ack(id);
  });
  await bobRelay.connect();
  await box.next(2);
  t.is(box.got.length, 2);
  t.is(streams.length, 1);
  await bobRelay.flushAcks();
  const gone = once(streams[0]!, 'close');
  bobRelay.close();
  await gone; // the hub has seen bob go
  t.is(await sender.send(envelopeTo(alice, bob, 'late')), 'queued');
  now += DEFAULT_LIMITS.ttlMs + 60_000; // past the 7-day mailbox TTL
  const box2 = inbox();
  const again = new RelayClient(hub.url, bob, box2.push, () => now);
  await again.connect();
  t.teardown(() => again.close());
  // The queue is flushed as the stream opens, so anything queued would come before this marker.
  const marker = envelopeTo(alice, bob, 'marker');
  t.is(await sender.send(marker), 'delivered');
  await box2.next(1);
  t.deepEqual(box2.got, [marker], 'expired envelopes are dropped, not delivered');
  t.is(await hub.storage.mailbox.sweep(now), 1, 'and swept from the store');
});

test('SPEC §11: a burst pushed at once reaches the node whole and in order, at most 8 envelopes in a turn of its event loop', async (t) => {
  const { hub, alice, bob } = await setup(t);
  const sender = new RelayClient(hub.url, alice, () => {});
  t.teardown(() => sender.close());
  // Queued while bob is away, the 40 leave on his stream together as it opens.
  const sent: Uint8Array[] = [];
  for (let i = 0; i < 40; i++) {
    sent.push(envelopeTo(alice, bob, `burst ${i}`));
    t.is(await sender.send(sent[i]!), 'queued');
  }
  const box = inbox();
  const perTurn: number[] = [];
  let turnOpen = false;
  const bobRelay = new RelayClient(hub.url, bob, (b) => {
    if (!turnOpen) {
      turnOpen = true;
      perTurn.push(0);
      setImmediate(() => {
        turnOpen = false;
      });
    }
    perTurn[perTurn.length - 1]!++;
    box.push(b);
  });
  t.teardown(() => bobRelay.close());
  await bobRelay.connect();
  await box.next(40);
  t.deepEqual(box.got, sent, 'every envelope, in the order sent');
  t.true(Math.max(...perTurn) <= 8, `per turn: ${perTurn.join(', ')}`);
  // Read together, the rest waited for later turns: without the slices, one turn would take them all.
  t.true(perTurn.filter((n) => n === 8).length >= 4, `per turn: ${perTurn.join(', ')}`);
});

test('SPEC §11: a relay client closed while pushed envelopes wait for their turn hands on none of them', async (t) => {
  // A stand-in hub that writes 40 small frames in one write, so that they are read together.
  const server = createServer((req, res) => {
    if (req.url !== '/relay/v2/stream') return void res.end();
    res.writeHead(200);
    res.write(Buffer.concat(Array.from({ length: 40 }, (_, i) => frame(Buffer.from(`envelope ${i}`)))));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  const { port } = server.address() as AddressInfo;
  const id = await createIdentity(join(await tempDir(t), 'node'), Date.now());
  const got: string[] = [];
  // Closed as the first slice ends, the other 32 waiting for later turns.
  const relay: RelayClient = new RelayClient(`http://127.0.0.1:${port}`, id, (b) => {
    if (got.push(Buffer.from(b).toString()) === 8) relay.close();
  });
  await relay.connect();
  await until(() => got.length >= 8, 'the first slice');
  for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
  t.deepEqual(
    got,
    Array.from({ length: 8 }, (_, i) => `envelope ${i}`),
    'none of the waiting envelopes after close',
  );
});

test('SPEC §11: receiving needs a stream signed by the AID; garbage is refused', async (t) => {
  const { hub, alice, root } = await setup(t);
  const stranger = await createIdentity(join(root, 'stranger'), Date.now());
  await t.throwsAsync(new RelayClient(hub.url, stranger, () => {}).connect(), { instanceOf: HubRefusedError, message: /UNKNOWN_AID/ });
  const res = await fetch(`${hub.url}/relay/v2/send`, { method: 'POST', body: 'not cbor' });
  t.is(res.status, 400);
  t.is((await res.json()).error.code, 'BAD_ENVELOPE');
  const forged = await fetch(`${hub.url}/relay/v2/stream`, {
    headers: { 'x-anet-aid': alice.aid, 'x-anet-time': String(Date.now()), 'x-anet-nonce': '0'.repeat(32), 'x-anet-signature': 'AAAA' },
  });
  t.is(forged.status, 401);
});

test('SPEC §11, WIRE §4: the hub writes no plaintext byte of the messages it relays to its data dir, only the sealed envelopes it keeps', async (t) => {
  const { hub, alice, bob, root } = await setup(t);
  const sender = new RelayClient(hub.url, alice, () => {});
  t.teardown(() => sender.close());
  const marker = 'MARKER-relay-body-7f3a';
  const sent: Uint8Array[] = [];
  for (let i = 0; i < 5; i++) {
    const e = envelopeTo(alice, bob, marker);
    sent.push(e);
    await sender.send(e);
  }
  await hub.close();
  const files: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const e of await readdir(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) await walk(p);
      else files.push(p);
    }
  };
  await walk(join(root, 'hub'));
  let bytes = 0;
  for (const f of files) {
    const content = await readFile(f);
    bytes += (await stat(f)).size;
    t.false(content.includes(Buffer.from(marker)), `${f} holds a message body`);
  }
  t.true(bytes > 0);
  t.is(hub.relay.stats.queued, 5);
});

test('SPEC §11: a relay client closed while its stream is being opened does not keep a stream', async (t) => {
  const { hub, alice, bob } = await setup(t);
  const box = inbox();
  const client = new RelayClient(hub.url, bob, box.push);
  const opening = client.connect();
  client.close();
  await t.throwsAsync(opening);
  t.false(client.connected);
  const sender = new RelayClient(hub.url, alice, () => {});
  t.teardown(() => sender.close());
  const env = envelopeTo(alice, bob, 'after close');
  const out = await sender.send(env);
  t.is(out, 'queued', 'no stream of bob is attached at the hub');
  t.is(box.got.length, 0);
});

test('SPEC §8: our key set rides on messages to a peer until one carrying it was taken by the hub, not merely sealed', async (t) => {
  const net = await startNet(t);
  const a = await net.node('a');
  const b = await net.node('b');
  const da = await net.start(a.dir);
  await net.start(b.dir);
  const messenger = await da.node.network();
  const first = await messenger.seal(b.aid, 'test.ping', 'one');
  t.true(first.withKeys, 'the first message to a peer carries our key set');
  // Sealed but never sent (its journal write failed, say): the next one must carry the keys again.
  const second = await messenger.seal(b.aid, 'test.ping', 'two');
  t.true(second.withKeys);
  await messenger.deliver(second);
  const third = await messenger.seal(b.aid, 'test.ping', 'three');
  t.false(third.withKeys, 'once delivered, the keys stay off later messages');
  t.true(third.bytes.length < second.bytes.length, 'and the message is smaller without them');
});
