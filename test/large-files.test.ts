// SPEC §2.1 (`files`), §3, §11, WIRE §4: files of the size the default config promises cross the hub end to
// end (as blobs, issue 20: test/files.test.ts has the 64 MiB ones); the hub's offline queue is bounded in
// bytes as well as in count.
import test, { type ExecutionContext } from 'ava';
import { createHash } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createServer, get as httpGet, request as httpRequest, type IncomingMessage } from 'node:http';
import { startNet, type Net } from './helpers/net.js';
import { png } from './helpers/png.js';
import { runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { until } from './helpers/wait.js';
import { startSampleService, type SampleHandler } from '../src/service/sample.js';
import { Level } from 'level';
import { LevelMailbox } from '../src/hub/storage/level-mailbox.js';
import { Relay, DEFAULT_LIMITS, type RelayLimits } from '../src/hub/relay.js';
import { MAX_ENVELOPE, MAX_MESSAGE } from '../src/protocol/relay.js';
import { RelayClient } from '../src/relay/client.js';
import { HubClient, HubRefusedError } from '../src/hub-client/client.js';
import { currentKeys, signKeySet } from '../src/relay/keyset.js';
import { sealEnvelope } from '../src/protocol/envelope.js';
import { generateX25519 } from '../src/protocol/hpke.js';
import { createIdentity, type Identity } from '../src/identity/store.js';

const MIB = 1024 * 1024;
const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');
/** A provider whose `image.sum` capability takes files (default max_bytes) and answers their digests. */
async function provider(t: ExecutionContext, net: Net, files: Record<string, unknown>) {
  const run = join(net.root, 'run');
  await mkdir(run, { mode: 0o700 });
  const seen: { files: number; calls: number } = { files: 0, calls: 0 };
  const digest = (f: { mime: string; data_b64: string }) => {
    const bytes = Buffer.from(f.data_b64, 'base64');
    return { mime: f.mime, bytes: bytes.length, sha256: sha256(bytes) };
  };
  // The answer stays small (a result is at most 1 MiB, SPEC §3): the digests of what arrived, not the files.
  const handler: SampleHandler = (body) => {
    const list = (body as { files: { mime: string; data_b64: string }[] }).files;
    seen.calls++;
    seen.files += list.length;
    return { files: list.map(digest) };
  };
  const service = await startSampleService(join(run, 'svc.sock'), handler);
  t.teardown(() => service.close());
  const caps = [{ id: 'image.sum', files: { media_types: ['image/png'], ...files } }];
  const config = {
    inbound: { policy: 'open', public_capabilities: caps },
    modules: { service: { capabilities: [{ id: 'image.sum', url: `unix://${service.socketPath}` }] } },
  };
  return { ...(await net.node('p', config)), seen };
}

async function callWith(net: Net, dir: string, to: string, images: Buffer[]) {
  const paths = await Promise.all(
    images.map(async (bytes, i) => {
      const path = join(net.root, `image-${i}-${Math.random().toString(16).slice(2)}.png`);
      await writeFile(path, bytes);
      return path;
    }),
  );
  const r = await runCli([
    'call',
    to,
    'image.sum',
    '--args',
    '{"what":"sum"}',
    ...paths.flatMap((p) => ['--file', p]),
    '--json',
    '--data',
    dir,
  ]);
  return { ...r, record: r.stdout ? JSON.parse(r.stdout) : null };
}

test('SPEC §2.1, §3, §11: a ~6 MiB PNG and one file of the default 8 MiB max cross the hub end to end, byte for byte', async (t) => {
  t.timeout(120_000);
  const net = await startNet(t);
  const p = await provider(t, net, {});
  const c = await net.node('c');
  await net.start(p.dir);
  await net.start(c.dir);
  for (const size of [6 * MIB + 12_345, 8 * MIB]) {
    const image = png(size);
    const r = await callWith(net, c.dir, p.aid, [image]);
    t.is(r.code, 0, r.stderr || r.stdout);
    t.like(r.record, { state: 'completed', reason: null });
    t.deepEqual(
      r.record.result.files,
      [{ mime: 'image/png', bytes: size, sha256: sha256(image) }],
      `${size} bytes: the service received exactly the file`,
    );
    t.regex(r.record.receipt, /^bafyrei/);
  }
});

async function identities(t: ExecutionContext) {
  const root = await tempDir(t);
  return Promise.all(['alice', 'bob'].map((name) => createIdentity(join(root, name), Date.now())));
}

/** Registers `id` on the net's hub with encryption keys published: the hub queues only for such nodes. */
async function onHub(t: ExecutionContext, net: Net, id: Identity): Promise<void> {
  const client = new HubClient(net.hub.url, id);
  await client.register('n', null);
  await client.putKeys(signKeySet(id, (await currentKeys(await tempDir(t), Date.now())).keys));
}

const key = generateX25519();
/** A real envelope from `from` to `to` with a text body of `size` bytes (padded to a power of two). */
const envelope = (from: Identity, to: Identity, size: number) =>
  sealEnvelope(
    { aid: from.aid, ksn: from.kel.ksn, signer: from.signer },
    { aid: to.aid, kid: new Uint8Array(16).fill(7), publicKey: key.publicKey },
    { type: 'test', ix: 0, ts: Date.now(), exp: Date.now() + 60_000, body: 'x'.repeat(size) },
  ).bytes;

/** A relay keeping mail in a LevelDB of its own, for any recipient (the hub keeps it for its own nodes). */
async function relayOn(t: ExecutionContext, now: () => number, limits: Partial<RelayLimits>): Promise<Relay> {
  const db = new Level<string, unknown>(join(await tempDir(t), 'mail'));
  await db.open();
  t.teardown(() => db.close());
  const relay = new Relay(now, limits, { mailbox: new LevelMailbox(db), agents: { isRecipient: async () => true } });
  t.teardown(() => relay.close());
  return relay;
}

test('SPEC §11: the offline queue is bounded in bytes per recipient, and a send past it is refused QUEUE_FULL like a full count', async (t) => {
  t.timeout(120_000);
  const net = await startNet(t);
  const [alice, bob] = await identities(t);
  await onHub(t, net, bob!);
  // Three distinct ones: the same bytes sent again are one envelope, kept once.
  const [large, large2, large3] = [0, 1, 2].map(() => envelope(alice!, bob!, MAX_MESSAGE - 4096));
  t.true(large!.length > MAX_MESSAGE && large!.length <= MAX_ENVELOPE, 'a largest envelope: a 16 MiB padded message');
  const sender = new RelayClient(net.hub.url, alice!, () => {});
  t.teardown(() => sender.close());
  t.is(await sender.send(large!), 'queued');
  t.is(await sender.send(large2!), 'queued');
  // Two largest envelopes fill bob's byte budget long before its count of 1000.
  const err = await t.throwsAsync(sender.send(large3!), { instanceOf: HubRefusedError });
  t.is(err!.status, 429);
  t.is(err!.code, 'QUEUE_FULL');
  t.is(await sender.send(envelope(alice!, bob!, 10)), 'queued', 'a small envelope still fits the bytes left');
  t.like(net.hub.relay.stats, { queued: 3, dropped: 1 });
  t.true(DEFAULT_LIMITS.perRecipientBytes >= MAX_ENVELOPE, 'an empty queue always takes a largest envelope');
});

test("SPEC §11: the byte bound and the count bound each give 'full'; expired envelopes free their bytes", async (t) => {
  const [alice, bob] = await identities(t);
  let now = 1_000;
  // Distinct envelopes of one size (the same bytes sent again are one envelope, kept once).
  const small = () => envelope(alice!, bob!, 10);
  const relay = await relayOn(t, () => now, {
    perRecipient: 3,
    perRecipientBytes: 2 * small().length,
    totalBytes: MAX_ENVELOPE,
    uploadBytes: MAX_ENVELOPE,
    ttlMs: 1000,
  });
  t.is(await relay.accept(small()), 'queued');
  t.is(await relay.accept(small()), 'queued');
  t.is(await relay.accept(small()), 'full', 'the bytes are used up (the count is not)');
  now += 1001;
  t.is(await relay.accept(small()), 'queued', 'expired envelopes no longer count');
  const byCount = await relayOn(t, () => now, {
    perRecipient: 1,
    perRecipientBytes: MAX_ENVELOPE,
    totalBytes: MAX_ENVELOPE,
    uploadBytes: MAX_ENVELOPE,
    ttlMs: 1000,
  });
  t.is(await byCount.accept(small()), 'queued');
  t.is(await byCount.accept(small()), 'full', 'the count bound still holds');
  t.is(await relay.accept(envelope(bob!, alice!, 10)), 'queued', 'per recipient: another one has its own budget');
});

test('SPEC §11: queued bytes are bounded for all recipients together (anonymous senders can name any AID), and expired ones are swept to make room', async (t) => {
  const root = await tempDir(t);
  const [alice, ...ids] = await Promise.all(['alice', 'a', 'b', 'c', 'd'].map((name) => createIdentity(join(root, name), Date.now())));
  let now = 1_000;
  const one = envelope(alice!, ids[0]!, 10);
  const relay = await relayOn(t, () => now, {
    perRecipient: 100,
    perRecipientBytes: MAX_ENVELOPE,
    totalBytes: 3 * one.length,
    uploadBytes: MAX_ENVELOPE,
    ttlMs: 1000,
  });
  // Three recipients, one envelope each: the hub-wide budget is used up although each queue has room.
  t.deepEqual(await Promise.all([0, 1, 2].map((i) => relay.accept(envelope(alice!, ids[i]!, 10)))), ['queued', 'queued', 'queued']);
  t.is(relay.queuedBytes(), 3 * one.length);
  t.is(await relay.accept(envelope(alice!, ids[3]!, 10)), 'full', 'a fourth recipient finds no room left');
  now += 1001;
  // Nobody touches the first three queues again: the sweep finds them expired and frees their bytes.
  t.is(await relay.accept(envelope(alice!, ids[3]!, 10)), 'queued');
  t.is(relay.queuedBytes(), one.length);
  t.is(relay.stats.expired, 3);
});

test("SPEC §11: a recipient that stops reading its stream gets no more than its queue's worth buffered at the hub", async (t) => {
  t.timeout(60_000);
  const [alice, bob] = await identities(t);
  const limit = 4 * MIB;
  const relay = await relayOn(t, Date.now, {
    perRecipient: 1000,
    perRecipientBytes: limit,
    totalBytes: 64 * MIB,
    uploadBytes: MAX_ENVELOPE,
    ttlMs: 60_000,
  });
  const server = createServer((req, res) => relay.attach(bob!.aid, req, res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => server.close());
  const port = (server.address() as { port: number }).port;
  // The recipient opens its stream and never reads from it.
  const response = await new Promise<IncomingMessage>((r) => httpGet({ host: '127.0.0.1', port }, r));
  response.pause();
  const outcomes: string[] = [];
  for (let i = 0; i < 200 && !outcomes.includes('full'); i++) {
    // Distinct envelopes: the same bytes again would be one envelope, kept once.
    outcomes.push(await relay.accept(envelope(alice!, bob!, MIB - 4096)));
    await new Promise((r) => setImmediate(r));
  }
  t.true(outcomes.includes('full'), `the hub stopped pushing to a stream nobody reads (after ${outcomes.length} sends)`);
  t.true(outcomes.filter((o) => o === 'delivered').length < 200);
  response.destroy();
});

test("SPEC §11: senders that stall their uploads hold none of the hub's upload budget (taken as bytes arrive); the rest still get through", async (t) => {
  t.timeout(60_000);
  const net = await startNet(t);
  const [alice, bob] = await identities(t);
  await onHub(t, net, bob!);
  const url = new URL(net.hub.url);
  let seen = 0;
  net.hub.server.prependListener('request', (req) => void (req.url === '/relay/v2/send' && seen++));
  // Each stalled upload declares a largest envelope and sends nothing: more of them than the budget would
  // hold if declared lengths were reserved. (test/hostile/hub.test.ts: they are cut off at a deadline.)
  const open = () => {
    const req = httpRequest({
      host: url.hostname,
      port: url.port,
      path: '/relay/v2/send',
      method: 'POST',
      headers: { 'content-type': 'application/cbor', 'content-length': MAX_ENVELOPE },
    });
    req.on('error', () => {});
    let answered = false;
    req.on('response', (res) => {
      res.resume();
      answered = true;
    });
    req.flushHeaders();
    return { req, answered: () => answered };
  };
  const stalled = Array.from({ length: Math.floor(DEFAULT_LIMITS.uploadBytes / MAX_ENVELOPE) + 1 }, open);
  t.teardown(() => {
    for (const s of stalled) s.req.destroy();
  });
  await until(() => seen === stalled.length, 'the hub to take every stalled upload');
  t.is(net.hub.relay.uploads.used, 0, 'a declared length reserves nothing');
  const sender = new RelayClient(net.hub.url, alice!, () => {});
  t.teardown(() => sender.close());
  t.is(await sender.send(envelope(alice!, bob!, 10)), 'queued', 'a small message goes');
  t.is(await sender.send(envelope(alice!, bob!, MAX_MESSAGE - 4096)), 'queued', 'and a largest one');
  t.false(
    stalled.some((s) => s.answered()),
    'while the stalled uploads are still open',
  );
});
