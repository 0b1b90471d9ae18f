// SPEC §2.1 (`files`), §3, §11, WIRE §4: files of the size the default config promises cross the hub relay
// end to end; a call too large for one relay message is refused by the caller's own node with one clear line
// before anything leaves; the hub's offline queue is bounded in bytes as well as in count; `anet doctor`'s
// config check warns about files limits one message cannot carry.
import test, { type ExecutionContext } from 'ava';
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { createServer, get as httpGet, request as httpRequest, type IncomingMessage } from 'node:http';
import { startNet, type Net } from './helpers/net.js';
import { runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { until } from './helpers/wait.js';
import { startSampleService, type SampleHandler } from '../src/service/sample.js';
import { validateConfig } from '../src/config/load.js';
import { formatProblem } from '../src/config/problem.js';
import { Level } from 'level';
import { LevelMailbox } from '../src/hub/storage/level-mailbox.js';
import { Relay, DEFAULT_LIMITS, type RelayLimits } from '../src/hub/relay.js';
import { MAX_ENVELOPE, MAX_MESSAGE, fileBytesThatFit } from '../src/protocol/relay.js';
import { RelayClient } from '../src/relay/client.js';
import { HubClient, HubRefusedError } from '../src/hub-client/client.js';
import { currentKeys, signKeySet } from '../src/relay/keyset.js';
import { sealEnvelope } from '../src/protocol/envelope.js';
import { generateX25519 } from '../src/protocol/hpke.js';
import { createIdentity, type Identity } from '../src/identity/store.js';

const MIB = 1024 * 1024;
const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');
/** One PNG chunk: length, type, data, CRC-32 of type and data. */
const chunk = (type: string, data: Buffer) => {
  const head = Buffer.alloc(4);
  head.writeUInt32BE(data.length);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([Buffer.from(type, 'latin1'), data])));
  return Buffer.concat([head, Buffer.from(type, 'latin1'), data, crc]);
};
/** A PNG of exactly `size` bytes: signature, IHDR, one IDAT of random filler, IEND (the node detects image/png). */
const png = (size: number) => {
  const ihdr = Buffer.from('00000400000003000802000000', 'hex'); // 1024 × 768, 8-bit truecolor
  const filler = size - 8 - (12 + ihdr.length) - 12 - 12;
  return Buffer.concat([
    Buffer.from('89504e470d0a1a0a', 'hex'),
    chunk('IHDR', ihdr),
    chunk('IDAT', randomBytes(filler)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
};

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

test('SPEC §2.1, §3, §11: a ~6 MiB PNG and one file of the default 8 MiB max cross the relay end to end, byte for byte', async (t) => {
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

test('SPEC §2.1, §11: a call whose sealed message is over the relay limit fails at once with one clear line; nothing reaches the hub', async (t) => {
  t.timeout(120_000);
  const net = await startNet(t);
  const p = await provider(t, net, { max_count: 2 });
  const c = await net.node('c');
  await net.start(p.dir);
  await net.start(c.dir);
  // Every request that reaches the hub's relay send route, accepted or not (a TOO_LARGE refusal included).
  let sends = 0;
  net.hub.server.prependListener('request', (req) => void (req.url?.startsWith('/relay/v2/send') && sends++));
  const envelopes = net.envelopes();
  const r = await callWith(net, c.dir, p.aid, [png(8 * MIB), png(8 * MIB)]);
  t.is(r.code, 1);
  const lines = r.stderr.split('\n');
  t.is(lines.length, 1, r.stderr);
  const line =
    "the call's 2 files (16 MiB) are 32 MiB sealed (base64, padded to a power of two); the relay carries at most 16 MiB per message: send fewer or smaller files (about 12 MiB in all fits)";
  t.is(lines[0], `anet: ${line}`);
  t.is(sends, 0, 'no request to the relay');
  t.is(net.envelopes(), envelopes, 'no envelope reached the hub');
  t.deepEqual(p.seen, { files: 0, calls: 0 }, 'the service was never called');
  const [task] = JSON.parse((await runCli(['tasks', '--json', '--data', c.dir])).stdout);
  t.like(task, { to: p.aid, capability: 'image.sum', state: 'failed', reason: 'not_delivered', detail: line });
  // Smaller files still go: the caller's node and the relay are left as they were.
  const ok = await callWith(net, c.dir, p.aid, [png(4 * MIB), png(4 * MIB)]);
  t.is(ok.code, 0, ok.stderr);
  t.is(ok.record.result.files.length, 2);
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

test('SPEC §2.1, §11: the config check warns (not an error) at the files path when max_count × max_bytes cannot fit in one relay message', (t) => {
  const svc = (id: string) => ({ id, url: `unix:///run/anet/${id}.sock` });
  const check = (files: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    validateConfig({
      inbound: { public_capabilities: [{ id: 'img', files: { media_types: ['image/png'], ...files }, ...extra }] },
      modules: { service: { capabilities: [svc('img')] } },
    });
  t.deepEqual(check({}).problems, [], 'the defaults (one file of 8 MiB) fit');
  const fit = fileBytesThatFit(4096);
  t.deepEqual(check({ max_bytes: fit }).problems, [], 'one file as large as fits');
  t.is(check({ max_bytes: fit + 1 }).problems.length, 1, 'one byte more does not');
  const { config, problems } = check({ max_count: 8 });
  t.truthy(config, 'a warning keeps the config usable');
  t.deepEqual(
    problems.map((p) => formatProblem(p)),
    [
      'warning: config.json inbound.public_capabilities[0].files: "img" accepts 8 × 8 MiB of files, but one relay message carries at most 16 MiB (about 12 MiB of files once base64-encoded): larger calls cannot be sent; lower max_count or max_bytes',
    ],
  );
  t.is(check({ max_bytes: 3 * MIB, max_count: 4 }).problems.length, 1, '4 × 3 MiB is 16 MiB as base64');
  t.deepEqual(check({ max_bytes: 3 * MIB, max_count: 3 }).problems, [], '3 × 3 MiB fits');
  t.is(check({ max_bytes: fit }, { max_args_bytes: 1 * MIB }).problems.length, 1, 'the arguments take their share');
});
