// SPEC §11: a node's sends ride one upstream connection to the hub relay (GET /relay/v2/upstream,
// upgraded), one answer per envelope in order; a hub that does not upgrade gets POSTs; an upstream that
// drops fails only the sends waiting on it.
import test, { type ExecutionContext } from 'ava';
import { createServer, connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { join } from 'node:path';
import { envelopeTo } from './helpers/envelopes.js';
import { tempDir } from './helpers/tmp.js';
import { until } from './helpers/wait.js';
import { startTestHub } from './helpers/hub.js';
import { HubClient, HubRefusedError, HubUnreachableError } from '../src/hub-client/client.js';
import { RelayClient } from '../src/relay/client.js';
import { Level } from 'level';
import { LevelMailbox } from '../src/hub/storage/level-mailbox.js';
import { Relay, type RelayLimits as RelayLimitsT } from '../src/hub/relay.js';
import { UPSTREAM_MAX, UPSTREAM_PROTOCOL, frame } from '../src/protocol/relay.js';
import { createIdentity, type Identity } from '../src/identity/store.js';

async function setup(t: ExecutionContext) {
  const root = await tempDir(t);
  const hub = await startTestHub({ dataDir: join(root, 'hub'), port: 0 });
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

/** A connected receiver: the envelopes it got, in order. */
async function receiver(t: ExecutionContext, hubUrl: string, id: Identity) {
  const got: Uint8Array[] = [];
  const relay = new RelayClient(hubUrl, id, (b) => got.push(b));
  await relay.connect();
  t.teardown(() => relay.close());
  return got;
}

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
  t.deepEqual(
    await Promise.all(sends),
    envelopes.map(() => 'delivered'),
  );
  const refusal = await t.throwsAsync(garbage, { instanceOf: HubRefusedError });
  t.like(refusal, { status: 400, code: 'BAD_ENVELOPE' });
  t.is(await more, 'delivered');
  await until(() => got.length === 51, 'the 51 envelopes at the receiver');
  // The same bytes, in the order they were sent on the one upstream.
  const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
  t.deepEqual(got.map(hex), [...envelopes, after].map(hex));
  t.is(seen.upgrades.length, 1, 'one upstream for all the sends');
  t.is(seen.posts, 0, 'no POST');
  sender.close();
  await t.throwsAsync(sender.send(after), { message: 'the relay client was closed' });
  t.is(seen.posts, 0, 'nothing is sent after close');
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
  await t.throwsAsync(sender.send(envelopeTo(alice, bob, 'lost')), {
    instanceOf: HubUnreachableError,
    message: /the relay upstream closed/,
  });
  t.is(await sender.send(envelopeTo(alice, bob, 'next')), 'delivered');
  t.is(seen.upgrades.length, 2);
  await until(() => got.length === 1, 'the envelope at the receiver');
  t.is(got.length, 1);
});

/** A relay serving raw upstream connections (no HTTP), and clients that collect its answer frames. */
async function rawRelay(t: ExecutionContext, limits: Partial<RelayLimitsT> = {}) {
  // The mailbox on a LevelDB of its own; mail kept for any recipient (the hub keeps it for its own nodes).
  const db = new Level<string, unknown>(join(await tempDir(t), 'mail'));
  await db.open();
  t.teardown(() => db.close());
  const mailbox = new LevelMailbox(db);
  const relay = new Relay(Date.now, limits, { mailbox, agents: { isRecipient: async () => true } });
  const hubSide: Socket[] = [];
  // Half-open allowed, as on the hub's HTTP server (an upgraded socket keeps that setting).
  const server = createServer({ allowHalfOpen: true }, (socket) => {
    hubSide.push(socket);
    relay.upstream(socket, Buffer.alloc(0));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    relay.close();
    server.close();
  });
  const client = () => {
    const socket: Socket = connect((server.address() as { port: number }).port, '127.0.0.1');
    socket.on('error', () => {}); // resets when the hub ends a connection are what some tests wait for
    const answers: { error?: { status: number; code: string } }[] = [];
    let buffered = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      while (buffered.length >= 4 && buffered.length >= 4 + buffered.readUInt32BE(0)) {
        answers.push(JSON.parse(buffered.subarray(4, 4 + buffered.readUInt32BE(0)).toString()));
        buffered = buffered.subarray(4 + buffered.readUInt32BE(0));
      }
    });
    const closed = new Promise<void>((r) => socket.once('close', () => r()));
    /** The hub's side of this connection (while it is open: a closed socket has no remote port). */
    const hubSideOf = () => hubSide.find((s) => s.remotePort === socket.localPort);
    return { socket, answers, closed, hubSide: hubSideOf };
  };
  /** Whether `bytes` of the upload budget are free now (probed, then given back). */
  const free = (bytes: number) => {
    const ok = relay.startUpload(bytes);
    if (ok) relay.endUpload(bytes);
    return ok;
  };
  return { relay, mailbox, hubSide, client, free };
}

const header = (length: number) => {
  const head = Buffer.alloc(4);
  head.writeUInt32BE(length);
  return head;
};

test('SPEC §11: an upstream frame the upload budget has no room for is dropped and answered BUSY; one past the limit ends the connection', async (t) => {
  const { hubSide, client } = await rawRelay(t, { uploadBytes: 1000 });
  const { socket, answers, closed } = client();
  // 5000 bytes, over the 1000-byte budget, sent in pieces (the header alone first); then 900 bytes twice,
  // each within the budget (the second once the first was answered: a frame holds its room until then),
  // and an empty frame alone. A piece is alone when the hub has read all before it.
  const readByHub = (bytes: number) => until(() => hubSide[0]?.bytesRead === bytes, `the hub to read ${bytes} bytes`);
  const big = frame(new Uint8Array(5000));
  socket.write(big.subarray(0, 4));
  await readByHub(4);
  socket.write(big.subarray(4, 2000));
  socket.write(big.subarray(2000));
  socket.write(frame(new Uint8Array(900)));
  await until(() => answers.length === 2, 'two answers');
  socket.write(frame(new Uint8Array(900)));
  await until(() => answers.length === 3, 'three answers');
  socket.write(header(0));
  await until(() => answers.length === 4, 'four answers');
  t.like(answers[0], { error: { status: 503, code: 'BUSY' } });
  t.like(answers[1], { error: { status: 400, code: 'BAD_ENVELOPE' } }, 'the 900 bytes were read whole, within the budget');
  t.like(answers[2], { error: { status: 400, code: 'BAD_ENVELOPE' } }, 'and their room was given back');
  t.like(answers[3], { error: { status: 400, code: 'BAD_ENVELOPE' } }, 'an empty frame is refused like any bad envelope');
  socket.write(header(UPSTREAM_MAX + 1));
  socket.write(frame(new Uint8Array(10)));
  await closed;
  t.like(answers[4], { error: { status: 413, code: 'TOO_LARGE' } });
  t.is(answers.length, 5, 'nothing after the frame over the limit was read');
});

test('SPEC §11: an upstream whose client goes, or whose frame stalls, is closed by the hub and gives its budget back', async (t) => {
  const { hubSide, client, free } = await rawRelay(t, { uploadBytes: 1000, frameTimeoutMs: 200 });
  // A client closes its side between frames: a half-open connection the hub must not keep.
  const gone = client();
  gone.socket.write(frame(new Uint8Array(5)));
  await until(() => gone.answers.length === 1, 'the answer');
  gone.socket.end();
  await until(() => hubSide[0]?.destroyed === true && free(1000), 'the hub to close its side and free the budget');
  t.true(hubSide[0]?.destroyed, 'the hub closed its side');
  t.true(free(1000));
  // A frame that stops arriving: the connection ends after frameTimeoutMs, its room is given back.
  const stalled = client();
  stalled.socket.write(Buffer.concat([header(1000), Buffer.alloc(10)]));
  await until(() => !free(1000), 'the stalled frame to hold its room');
  t.false(free(1000), 'the stalled frame holds its room');
  await stalled.closed;
  await until(() => free(1000), "the stalled frame's room to be given back");
  t.true(free(1000));
  // Between frames a connection may idle past frameTimeoutMs. A frame that stalls once the idle connection
  // is answered runs against a deadline armed after any the idle one could have had (on a frame begun, or
  // on the connection opened): when it has closed its connection, the idle one's would have fired before.
  const idle = client();
  idle.socket.write(frame(new Uint8Array(5)));
  await until(() => idle.answers.length === 1, "the idle connection's answer");
  const idleHubSide = idle.hubSide();
  t.truthy(idleHubSide);
  const later = client();
  later.socket.write(Buffer.concat([header(10), Buffer.alloc(1)]));
  await later.closed;
  t.false(idleHubSide?.destroyed, 'the idle connection is still open');
  idle.socket.write(frame(new Uint8Array(5)));
  await until(() => idle.answers.length === 2, 'two answers');
  t.is(idle.answers.length, 2);
  idle.socket.destroy();
});

test('SPEC §11: a client that does not read its answers cannot make the hub hold them without bound', async (t) => {
  const { hubSide, client } = await rawRelay(t);
  const { socket, answers } = client();
  socket.pause();
  // 100 000 empty frames (400 KB) whose answers (BAD_ENVELOPE, ~110 bytes each) make ~11 MB.
  const frames = 100_000;
  socket.write(Buffer.concat(Array.from({ length: frames }, () => header(0))));
  // The hub stops reading once its answers wait to be written (they cannot all be written: nobody reads).
  await until(() => hubSide[0]?.isPaused() === true, 'the hub to stop reading');
  const held = hubSide[0]?.writableLength ?? 0;
  t.is(hubSide.length, 1);
  t.true(held < 256 * 1024, `the hub holds ${held} bytes of answers`);
  socket.resume();
  await until(() => answers.length === frames, 'every answer', 500);
  t.is(answers.length, frames, 'every frame was answered once the client read');
  socket.destroy();
});

test('SPEC §11: a client that reads no answers for frameTimeoutMs is disconnected, half-closed or not', async (t) => {
  const { hubSide, client } = await rawRelay(t, { frameTimeoutMs: 300 });
  const { socket } = client();
  socket.pause();
  socket.write(Buffer.concat(Array.from({ length: 100_000 }, () => header(0))));
  socket.end();
  await until(() => hubSide[0]?.destroyed === true, 'the hub to close the connection', 250);
  t.true(hubSide[0]?.destroyed, 'the hub closed the connection');
  socket.destroy();
});

test('SPEC §11: a hub answering garbage on the upstream fails the send at once, never hangs or crashes the node', async (t) => {
  for (const garbage of ['not json', 'null', '{}', '{"outcome":"lost"}']) {
    const server = createServer((socket) => {
      socket.once('data', () => {
        socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: ${UPSTREAM_PROTOCOL}\r\nConnection: Upgrade\r\n\r\n`);
        socket.on('data', () => socket.write(frame(Buffer.from(garbage))));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const sender = new RelayClient(`http://127.0.0.1:${(server.address() as { port: number }).port}`, (await setup(t)).alice, () => {});
    await t.throwsAsync(
      sender.send(Uint8Array.from([1, 2, 3])),
      { instanceOf: HubUnreachableError, message: /not a relay answer/ },
      garbage,
    );
    sender.close();
    server.close();
  }
});

test('SPEC §11: a hub that accepts the upstream and answers nothing fails the waiting sends, though the node keeps sending', async (t) => {
  const server = createServer((socket) => {
    socket.on('error', () => {});
    socket.once('data', () =>
      socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: ${UPSTREAM_PROTOCOL}\r\nConnection: Upgrade\r\n\r\n`),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => server.close());
  const sender = new RelayClient(`http://127.0.0.1:${(server.address() as { port: number }).port}`, (await setup(t)).alice, () => {});
  t.teardown(() => sender.close());
  sender.answerTimeoutMs = 500;
  const started = Date.now();
  const first = sender.send(Uint8Array.from([1]));
  // A send every 100 ms: our own writes must not push the deadline back.
  const sends = setInterval(() => void sender.send(Uint8Array.from([2])).catch(() => {}), 100);
  t.teardown(() => clearInterval(sends));
  await t.throwsAsync(first, { instanceOf: HubUnreachableError, message: /no answer from the hub within 0.5 s/ });
  clearInterval(sends);
  t.true(Date.now() - started < 3000, `failed after ${Date.now() - started} ms`);
});

test('SPEC §11: any other upgrade is refused with one JSON error; one pipelined behind a request closes its connection; the hub keeps serving', async (t) => {
  const { hub } = await setup(t);
  const { port } = new URL(hub.url);
  const exchange = async (request: string) => {
    const socket = connect(Number(port), '127.0.0.1');
    socket.on('error', () => {});
    socket.write(request);
    let text = '';
    socket.on('data', (c) => (text += c));
    await new Promise<void>((r) => socket.once('close', () => r()));
    return { status: Number(text.split(' ')[1]), body: text.slice(text.indexOf('\r\n\r\n') + 4), text };
  };
  // curl --http2 on a plain-HTTP URL asks for h2c like this.
  const h2c = await exchange(
    'GET /health HTTP/1.1\r\nHost: hub\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n',
  );
  t.is(h2c.status, 400);
  t.is(JSON.parse(h2c.body).error.code, 'BAD_UPGRADE');
  // An upgrade in the same packet as a request still being answered: the connection closes, the hub stays.
  const pipelined = await exchange(
    `GET /health HTTP/1.1\r\nHost: hub\r\n\r\nGET /relay/v2/upstream HTTP/1.1\r\nHost: hub\r\nConnection: Upgrade\r\nUpgrade: ${UPSTREAM_PROTOCOL}\r\n\r\n`,
  );
  t.notRegex(pipelined.text, /101 Switching/);
  t.is((await fetch(`${hub.url}/health`)).status, 200);
});

test('SPEC §11: a frame that trickles in past its deadline ends its connection; after TOO_LARGE nothing more is read', async (t) => {
  const { hubSide, client, free } = await rawRelay(t, { uploadBytes: 1000, frameTimeoutMs: 1000 });
  const trickle = client();
  trickle.socket.write(header(500));
  // A byte every 50 ms: the whole frame would take 25 s. The deadline, a second after the header, comes first.
  let dripped = 0;
  let whole!: () => void;
  const wholeSent = new Promise<boolean>((r) => (whole = () => r(false)));
  const drip = setInterval(() => {
    if (trickle.socket.writable) trickle.socket.write(Buffer.alloc(1));
    if (++dripped === 500) whole();
  }, 50);
  t.teardown(() => clearInterval(drip));
  const ended = await Promise.race([trickle.closed.then(() => true), wholeSent]);
  clearInterval(drip);
  t.true(ended, 'the connection was closed before its frame was whole');
  await until(() => free(1000), "the trickled frame's room to be given back");
  t.true(free(1000), 'its room was given back');
  // A client that reads nothing sends a frame over the limit, then keeps sending: the hub closes the
  // connection (what comes after the header is dropped, never buffered).
  const flood = client();
  flood.socket.pause();
  flood.socket.write(header(UPSTREAM_MAX + 1));
  const junk = Buffer.alloc(1024 * 1024);
  for (let i = 0; i < 8; i++) flood.socket.write(junk);
  await until(() => hubSide[1]?.destroyed === true, 'the hub to close the flooding connection');
  t.true(hubSide[1]?.destroyed);
  flood.socket.destroy();
});

test('SPEC §11: envelopes queued from an upstream are kept exactly as sent, one by one', async (t) => {
  const { mailbox, client } = await rawRelay(t);
  const { socket, answers } = client();
  const [alice, bob] = await Promise.all(['qa', 'qb'].map(async (n) => createIdentity(join(await tempDir(t), n), Date.now())));
  const envelopes = Array.from({ length: 20 }, (_, i) => envelopeTo(alice!, bob!, `m${i}`));
  socket.write(Buffer.concat(envelopes.map((e) => frame(e)))); // one chunk for all
  await until(() => answers.length === 20, 'twenty answers');
  t.true(answers.every((a) => (a as { outcome?: string }).outcome === 'queued'));
  const kept = await mailbox.list(bob!.aid, Date.now());
  t.deepEqual(
    kept.map((k) => Buffer.from(k.bytes).toString('hex')),
    envelopes.map((e) => Buffer.from(e).toString('hex')),
  );
  socket.destroy();
});
