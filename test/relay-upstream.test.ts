// SPEC §11: a node's sends ride one upstream connection to the hub relay (GET /relay/v2/upstream,
// upgraded), one answer per envelope in order; a hub that does not upgrade gets POSTs; an upstream that
// drops fails only the sends waiting on it.
import test from 'ava';
import { createServer, connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { join } from 'node:path';
import { tempDir } from './helpers/tmp.js';
import { startHub } from '../src/hub/server.js';
import { HubClient, HubRefusedError, HubUnreachableError } from '../src/hub/client.js';
import { RelayClient } from '../src/relay/client.js';
import { Relay, DEFAULT_LIMITS, UPSTREAM_MAX, frame } from '../src/hub/relay.js';
import { sealEnvelope } from '../src/relay/envelope.js';
import { generateX25519 } from '../src/relay/hpke.js';
import { createIdentity, type Identity } from '../src/identity/store.js';

async function setup(t: any) {
  const root = await tempDir(t);
  const hub = await startHub({ dataDir: join(root, 'hub'), port: 0 });
  t.teardown(() => hub.close());
  const mk = async (name: string) => {
    const id = await createIdentity(join(root, name), Date.now());
    await new HubClient(hub.url, id).register(name, null);
    return id;
  };
  // What reaches the hub: POSTed sends and upgrade requests (with the hub's side of each upstream).
  const seen = { posts: 0, upgrades: [] as Duplex[] };
  hub.server.prependListener('request', (req) => void (req.url === '/relay/v2/send' && seen.posts++));
  hub.server.prependListener('upgrade', (_req, socket) => void seen.upgrades.push(socket));
  return { hub, seen, alice: await mk('alice'), bob: await mk('bob') };
}

const key = generateX25519();
const kid = new Uint8Array(16).fill(1);
const envelopeTo = (from: Identity, to: Identity, body: string) =>
  sealEnvelope({ aid: from.aid, ksn: from.kel.ksn, signer: from.signer }, { aid: to.aid, kid, publicKey: key.publicKey }, { type: 'test', ix: 0, ts: Date.now(), exp: Date.now() + 60_000, body }).bytes;

/** A connected receiver: the envelopes it got, in order. */
async function receiver(t: any, hubUrl: string, id: Identity) {
  const got: Uint8Array[] = [];
  const relay = new RelayClient(hubUrl, id, (b) => got.push(b));
  await relay.connect();
  t.teardown(() => relay.close());
  return got;
}

const waitFor = async (check: () => boolean) => {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
};

test('SPEC §11: sends ride one upstream, answered in order; a refused envelope fails alone', async (t) => {
  const { hub, seen, alice, bob } = await setup(t);
  const got = await receiver(t, hub.url, bob);
  const sender = new RelayClient(hub.url, alice, () => {});
  t.teardown(() => sender.close());
  const envelopes = Array.from({ length: 50 }, (_, i) => envelopeTo(alice, bob, `m${i}`));
  const after = envelopeTo(alice, bob, 'after');
  const sends = envelopes.map((e) => sender.send(e));
  const garbage = sender.send(Uint8Array.from([1, 2, 3]));
  const more = sender.send(after);
  t.deepEqual(await Promise.all(sends), envelopes.map(() => 'delivered'));
  const refusal = await t.throwsAsync(garbage, { instanceOf: HubRefusedError });
  t.like(refusal, { status: 400, code: 'BAD_ENVELOPE' });
  t.is(await more, 'delivered');
  await waitFor(() => got.length === 51);
  // The same bytes, in the order they were sent on the one upstream.
  const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
  t.deepEqual(got.map(hex), [...envelopes, after].map(hex));
  t.is(seen.upgrades.length, 1, 'one upstream for all the sends');
  t.is(seen.posts, 0, 'no POST');
});

test('SPEC §11: an envelope past the upstream limit is POSTed; a hub that does not upgrade gets POSTs', async (t) => {
  const { hub, seen, alice, bob } = await setup(t);
  await receiver(t, hub.url, bob);
  const sender = new RelayClient(hub.url, alice, () => {});
  t.teardown(() => sender.close());
  t.is(await sender.send(envelopeTo(alice, bob, 'x'.repeat(UPSTREAM_MAX))), 'delivered');
  t.is(seen.posts, 1);
  t.is(seen.upgrades.length, 0, 'a large envelope does not open the upstream');
  // An older hub: no upgrade handler, so the upgrade request is an ordinary GET on a route it lacks.
  hub.server.removeAllListeners('upgrade');
  t.is(await sender.send(envelopeTo(alice, bob, 'small')), 'delivered');
  t.is(await sender.send(envelopeTo(alice, bob, 'small again')), 'delivered');
  t.is(seen.posts, 3, 'both small sends were POSTed');
});

test('SPEC §11: an upstream that drops fails the sends waiting on it as unreachable; the next send opens another', async (t) => {
  const { hub, seen, alice, bob } = await setup(t);
  const got = await receiver(t, hub.url, bob);
  // The hub's side of the first upstream dies as its first frame arrives, before reading it (the relay's
  // reader is taken off once it is attached, which is before any frame can arrive).
  hub.server.prependListener('upgrade', (_req, socket) => {
    if (seen.upgrades.length > 0) return;
    setImmediate(() => {
      socket.removeAllListeners('data');
      socket.on('data', () => socket.destroy());
    });
  });
  const sender = new RelayClient(hub.url, alice, () => {});
  t.teardown(() => sender.close());
  await t.throwsAsync(sender.send(envelopeTo(alice, bob, 'lost')), { instanceOf: HubUnreachableError, message: /the relay upstream closed/ });
  t.is(await sender.send(envelopeTo(alice, bob, 'next')), 'delivered');
  t.is(seen.upgrades.length, 2);
  await waitFor(() => got.length === 1);
  t.is(got.length, 1);
});

test('SPEC §11: an upstream frame the upload budget has no room for is dropped and answered BUSY; one past the limit ends the connection', async (t) => {
  const relay = new Relay(Date.now, { ...DEFAULT_LIMITS, uploadBytes: 1000 });
  const server = createServer((socket) => relay.upstream(socket, Buffer.alloc(0)));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => (relay.close(), server.close()));
  const socket: Socket = connect((server.address() as { port: number }).port, '127.0.0.1');
  const answers: unknown[] = [];
  let buffered = Buffer.alloc(0);
  socket.on('data', (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    while (buffered.length >= 4 && buffered.length >= 4 + buffered.readUInt32BE(0)) {
      answers.push(JSON.parse(buffered.subarray(4, 4 + buffered.readUInt32BE(0)).toString()));
      buffered = buffered.subarray(4 + buffered.readUInt32BE(0));
    }
  });
  const closed = new Promise<void>((r) => socket.once('close', () => r()));
  // 5000 bytes, over the 1000-byte budget, sent in pieces; then 900 bytes twice, each within the budget.
  const big = frame(new Uint8Array(5000));
  socket.write(big.subarray(0, 3));
  socket.write(big.subarray(3, 2000));
  socket.write(big.subarray(2000));
  socket.write(frame(new Uint8Array(900)));
  socket.write(frame(new Uint8Array(900)));
  await waitFor(() => answers.length === 3);
  t.like(answers[0], { error: { status: 503, code: 'BUSY' } });
  t.like(answers[1], { error: { status: 400, code: 'BAD_ENVELOPE' } }, 'the 900 bytes were read whole, within the budget');
  t.like(answers[2], { error: { status: 400, code: 'BAD_ENVELOPE' } }, 'and their room was given back');
  const head = Buffer.alloc(4);
  head.writeUInt32BE(UPSTREAM_MAX + 1);
  socket.write(head);
  await closed;
  t.like(answers[3], { error: { status: 413, code: 'TOO_LARGE' } });
  t.is(answers.length, 4);
});

test('SPEC §11: the hub refuses any other upgrade with one JSON error', async (t) => {
  const { hub } = await setup(t);
  const { port } = new URL(hub.url);
  const socket = connect(Number(port), '127.0.0.1');
  socket.write('GET /health HTTP/1.1\r\nHost: hub\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
  let text = '';
  socket.on('data', (c) => (text += c));
  await new Promise<void>((r) => socket.once('close', () => r()));
  t.regex(text, /^HTTP\/1\.1 400 /);
  t.is(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)).error.code, 'BAD_UPGRADE');
});
