// Hostile probes of the hub (issue 18: items 1, 4, 5, 8, 9, 10): stalled and parked request bodies, a queue
// filled through invented recipients, a raced nonce, a bad request target, and registration without
// bounds. Each reproduces what a probe found, on loopback, bounded in count and time; deadlines are
// injected as startHub options so no test waits for a real 10 s deadline, and nothing sleeps a fixed time.
import test, { type ExecutionContext } from 'ava';
import { request as httpRequest, type ClientRequest } from 'node:http';
import { createServer, connect, type Socket } from 'node:net';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { tempDir } from '../helpers/tmp.js';
import { until } from '../helpers/wait.js';
import { runCli } from '../helpers/cli.js';
import { startNet, rawPeer } from '../helpers/net.js';
import type { Hub, HubOptions } from '../../src/hub/server.js';
import { startTestHub, onLevelDb } from '../helpers/hub.js';

/** Writes a stopped hub's LevelDB: the embedded run only (a PostgreSQL hub's data dir says where its store is). */
const levelDbTest = onLevelDb ? test : () => {};
import { HubClient, HubRefusedError } from '../../src/hub-client/client.js';
import { RelayClient } from '../../src/relay/client.js';
import { Level } from 'level';
import { LevelMailbox } from '../../src/hub/storage/level-mailbox.js';
import { Relay } from '../../src/hub/relay.js';
import { MAX_ENVELOPE, UPSTREAM_MAX, frame } from '../../src/protocol/relay.js';
import { signRequest } from '../../src/protocol/hub-auth.js';
import { encodeKel } from '../../src/identity/kel.js';
import { encodeCanonical } from '../../src/identity/cbor.js';
import { createIdentity, type Identity } from '../../src/identity/store.js';
import { currentKeys, signKeySet } from '../../src/relay/keyset.js';

const KIB = 1024;
const MIB = 1024 * KIB;

/**
 * An envelope as the relay reads it (only `to` matters to the hub), `size` bytes of ciphertext: 300 by
 * default, past the smallest envelope the hub takes (a sealed message is padded to 256 bytes).
 */
const fake = (to: string, size = 300) =>
  encodeCanonical(
    new Map<number, unknown>([
      [1, 1],
      [2, to],
      [6, new Uint8Array(size)],
    ]),
  );

async function hubAt(t: ExecutionContext, opts: Partial<HubOptions> = {}): Promise<{ hub: Hub; root: string }> {
  const root = await tempDir(t);
  const hub = await startTestHub({ dataDir: join(root, 'hub'), port: 0, ...opts });
  t.teardown(() => hub.close());
  return { hub, root };
}

/** A node of the hub: registered, with its encryption key set published (as a daemon leaves it). */
async function member(hubUrl: string, root: string, name: string, headers: Record<string, string> = {}): Promise<Identity> {
  const dir = join(root, name);
  const id = await createIdentity(dir, Date.now());
  const body = { kel: Buffer.from(encodeKel(id.kel.events)).toString('base64'), name, card: null };
  const r = await signed(hubUrl, id, 'POST', '/agents', Buffer.from(JSON.stringify(body)), headers);
  if (r.status !== 200) throw new Error(`register ${name}: ${JSON.stringify(r.body)}`);
  const { keys } = await currentKeys(dir, Date.now());
  await new HubClient(hubUrl, id).putKeys(signKeySet(id, keys));
  return id;
}

async function signed(
  hubUrl: string,
  id: Identity,
  method: string,
  path: string,
  body: Buffer<ArrayBuffer>,
  headers: Record<string, string> = {},
) {
  const res = await fetch(`${hubUrl}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...signRequest(id.signer, id.aid, method, path, body, Date.now()), ...headers },
    body,
  });
  return { status: res.status, body: await res.json().catch(() => null) };
}

const registerBody = (id: Identity, extra: Record<string, unknown> = {}) =>
  Buffer.from(JSON.stringify({ kel: Buffer.from(encodeKel(id.kel.events)).toString('base64'), name: 'n', card: null, ...extra }));

interface Exchange {
  req: ClientRequest;
  /** The answer once it came whole (status 0 until then), and whether the connection closed. */
  state: { status: number; body: any; closed: boolean };
}

/**
 * A request whose headers go at once and whose body the test writes (or not): `declared` is its
 * Content-Length (none: chunked).
 */
function open(hubUrl: string, path: string, opts: { declared?: number; headers?: Record<string, string>; method?: string } = {}): Exchange {
  const u = new URL(hubUrl);
  const headers: Record<string, string> = { 'content-type': 'application/octet-stream', ...opts.headers };
  if (opts.declared !== undefined) headers['content-length'] = String(opts.declared);
  const req = httpRequest({ host: u.hostname, port: u.port, path, method: opts.method ?? 'POST', headers, agent: false });
  const state: Exchange['state'] = { status: 0, body: null, closed: false };
  req.on('error', () => {});
  req.on('response', (res) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('error', () => {});
    res.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      try {
        state.body = JSON.parse(text);
      } catch {
        state.body = text;
      }
      state.status = res.statusCode ?? -1;
    });
  });
  req.on('close', () => (state.closed = true));
  req.flushHeaders();
  return { req, state };
}

/** Writes `bytes` zeros to an open request in 64 KiB pieces; resolves when the socket took them. */
async function feed(ex: Exchange, bytes: number): Promise<void> {
  const piece = Buffer.alloc(64 * KIB);
  for (let left = bytes; left > 0 && !ex.state.closed; left -= piece.length) {
    await new Promise<void>((resolve) => {
      if (!ex.req.write(left >= piece.length ? piece : piece.subarray(0, left))) ex.req.once('drain', resolve);
      else resolve();
    });
  }
}

const code = (ex: Exchange) => ex.state.body?.error?.code as string | undefined;

// --- item 1: the relay's upload budget ---------------------------------------------------------------

test('SPEC §11 (hostile): 16 sends that declare 16 MiB and stall do not stop the relay; an honest send and an upstream frame still go', async (t) => {
  const net = await startNet(t);
  const receiver = await rawPeer(t, net, 'receiver');
  let seen = 0;
  net.hub.server.prependListener('request', (req) => void (req.url === '/relay/v2/send' && seen++));
  // 16 × 16 MiB is the whole 256 MiB budget as it was reserved before: each declares 16 MiB, sends nothing.
  const stalled = Array.from({ length: 16 }, () => open(net.hub.url, '/relay/v2/send', { declared: 16 * MIB }));
  t.teardown(() => {
    for (const s of stalled) s.req.destroy();
  });
  await until(() => seen === 16, 'the hub to take the 16 stalled sends');
  const sender = new RelayClient(net.hub.url, receiver.identity, () => {});
  t.teardown(() => sender.close());
  const outcome = (p: Promise<string>) => p.catch((err) => (err instanceof HubRefusedError ? err.code : String(err)));
  t.is(await outcome(sender.send(fake(receiver.aid))), 'delivered', 'a small send on the upstream');
  t.is(await outcome(sender.send(fake(receiver.aid, UPSTREAM_MAX + 10))), 'delivered', 'a large send as a POST');
  t.true(
    stalled.every((s) => s.state.status === 0),
    'the stalled sends are still open',
  );
});

test('SPEC §11 (hostile): a send body that stalls or trickles is cut off at its deadline and gives its budget back', async (t) => {
  const { hub, root } = await hubAt(t, { bodyIdleMs: 200, minBodyRate: 32 * KIB });
  const to = await member(hub.url, root, 'to');
  // 16 bodies that each send 64 KiB of a declared 16 MiB, then nothing.
  const stalled = Array.from({ length: 16 }, () => open(hub.url, '/relay/v2/send', { declared: MAX_ENVELOPE }));
  t.teardown(() => {
    for (const s of stalled) s.req.destroy();
  });
  await Promise.all(stalled.map((s) => feed(s, 64 * KIB)));
  await until(() => stalled.every((s) => s.state.status !== 0 || s.state.closed), 'the stalled bodies to be cut off', 250);
  t.deepEqual([...new Set(stalled.map((s) => s.state.status))], [408], 'each is answered 408');
  t.deepEqual([...new Set(stalled.map(code))], ['BODY_TIMEOUT']);
  await until(() => hub.relay.uploads.used === 0, 'the budget to be given back');
  // One that keeps sending, 100 bytes every 20 ms (5 KB/s, under the 32 KiB/s floor): its 64 KiB would take
  // 13 s; the deadline (idle + declared / floor = 2.2 s) ends it first.
  const trickle = open(hub.url, '/relay/v2/send', { declared: 64 * KIB });
  t.teardown(() => trickle.req.destroy());
  let sent = 0;
  const drip = setInterval(() => {
    if (!trickle.state.closed && sent < 64 * KIB - 100) {
      trickle.req.write(Buffer.alloc(100));
      sent += 100;
    }
  }, 20);
  t.teardown(() => clearInterval(drip));
  await until(() => trickle.state.status !== 0 || trickle.state.closed, 'the trickling body to be cut off', 400);
  clearInterval(drip);
  t.is(trickle.state.status, 408);
  t.true(sent < 64 * KIB - 100, 'before its body was whole');
  await until(() => hub.relay.uploads.used === 0, 'its budget to be given back');
  const sender = new RelayClient(hub.url, to, () => {});
  t.teardown(() => sender.close());
  t.is(await sender.send(fake(to.aid)), 'queued', 'the relay serves on');
});

test("SPEC §11 (hostile): one client's send bodies hold at most its share of the upload budget; another client's send is accepted", async (t) => {
  const { hub, root } = await hubAt(t, { trustProxy: true, limits: { uploadBytes: 4 * MIB, uploadBytesPerClient: 1 * MIB } });
  const to = await member(hub.url, root, 'to');
  const attacker = { 'x-forwarded-for': '203.0.113.6' };
  // 8 bodies of 512 KiB from one address: 4 MiB, the whole budget; its share is 1 MiB (two of them).
  const bodies = Array.from({ length: 8 }, () => open(hub.url, '/relay/v2/send', { declared: 512 * KIB + 1, headers: attacker }));
  t.teardown(() => {
    for (const s of bodies) s.req.destroy();
  });
  await Promise.all(bodies.map((s) => feed(s, 512 * KIB)));
  await until(() => bodies.filter((s) => s.state.status === 503).length >= 6, 'the bodies past the share to be refused', 250);
  t.true(bodies.filter((s) => code(s) === 'BUSY').length >= 6);
  t.true(hub.relay.uploads.of('203.0.113.6') <= 1 * MIB, `the address holds ${hub.relay.uploads.of('203.0.113.6')} bytes`);
  const envelope = fake(to.aid, 512 * KIB);
  const honest = open(hub.url, '/relay/v2/send', { headers: { 'x-forwarded-for': '198.51.100.1' }, declared: envelope.length });
  honest.req.end(envelope);
  await until(() => honest.state.status !== 0, "the honest send's answer");
  t.is(honest.state.status, 202, JSON.stringify(honest.state.body));
  t.is(honest.state.body.outcome, 'queued');
});

test("SPEC §11 (hostile): upstream frames that stall after their header hold no budget; another upstream's frame is accepted", async (t) => {
  const db = new Level<string, unknown>(join(await tempDir(t), 'mail'));
  await db.open();
  t.teardown(() => db.close());
  const relay = new Relay(Date.now, { uploadBytes: 1 * MIB }, { mailbox: new LevelMailbox(db), agents: { isRecipient: async () => true } });
  let headers = 0;
  const server = createServer({ allowHalfOpen: true }, (socket) => {
    socket.on('data', () => headers++);
    relay.upstream(socket, Buffer.alloc(0));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    relay.close();
    server.close();
  });
  const port = (server.address() as { port: number }).port;
  const clients: Socket[] = [];
  t.teardown(() => {
    for (const c of clients) c.destroy();
  });
  // Four headers of the largest frame (4 × 256 KiB: the whole 1 MiB, as reserved before), then nothing.
  for (let i = 0; i < 4; i++) {
    const c = connect(port, '127.0.0.1');
    c.on('error', () => {});
    const head = Buffer.alloc(4);
    head.writeUInt32BE(UPSTREAM_MAX);
    c.write(head);
    clients.push(c);
  }
  await until(() => headers >= 4, 'the hub to read the four headers');
  const honest = connect(port, '127.0.0.1');
  clients.push(honest);
  const answers: any[] = [];
  honest.on('data', (chunk: Buffer) => answers.push(JSON.parse(chunk.subarray(4).toString())));
  honest.write(frame(fake('bafyreirecipient', 1000)));
  await until(() => answers.length === 1, "the honest frame's answer");
  t.deepEqual(answers[0], { outcome: 'queued' });
});

// --- item 4: queue only for the hub's own nodes --------------------------------------------------------

test("SPEC §11 (hostile): the hub queues only for registered AIDs with keys; a flood to invented recipients leaves a real offline node's queue alone", async (t) => {
  const { hub, root } = await hubAt(t, { limits: { totalBytes: 8 * MIB } });
  const real = await member(hub.url, root, 'real');
  const bare = await createIdentity(join(root, 'bare'), Date.now());
  await new HubClient(hub.url, bare).register('bare', null);
  const invented = await createIdentity(join(root, 'invented'), Date.now());
  const sender = new RelayClient(hub.url, real, () => {});
  t.teardown(() => sender.close());
  const outcome = (p: Promise<string>) => p.catch((err) => (err instanceof HubRefusedError ? `${err.status} ${err.code}` : String(err)));
  t.is(await outcome(sender.send(fake(invented.aid))), '404 UNKNOWN_RECIPIENT', 'an AID the hub never saw');
  t.is(await outcome(sender.send(fake('not an aid'))), '404 UNKNOWN_RECIPIENT', 'a string that is no AID');
  t.is(await outcome(sender.send(fake(bare.aid))), '404 UNKNOWN_RECIPIENT', 'registered, but no encryption keys published');
  // What filled the hub's 512 MiB: large sends to invented recipients (here 12 × 1 MiB against 8 MiB).
  const flood = [];
  for (let i = 0; i < 12; i++) flood.push(await outcome(sender.send(fake(`bafyrei${'a'.repeat(52 - String(i).length)}${i}`, MIB))));
  t.deepEqual([...new Set(flood)], ['404 UNKNOWN_RECIPIENT']);
  t.is(hub.relay.queuedBytes(), 0, 'nothing of the flood is queued');
  t.is(await outcome(sender.send(fake(real.aid, MIB))), 'queued', 'the real offline node still gets its envelope');
  // The node prints the refusal as one line that names it.
  const err = await sender.send(fake(invented.aid)).catch((e: Error) => e);
  t.regex(String((err as Error).message), /^the hub refused: UNKNOWN_RECIPIENT: [^\n]+$/);
});

test('SPEC §11 (hostile): one client cannot fill the whole queue toward many real recipients', async (t) => {
  const { hub, root } = await hubAt(t, { trustProxy: true, limits: { totalBytes: 4 * MIB, queuedBytesPerClient: 2 * MIB } });
  const members = [];
  for (let i = 0; i < 4; i++) members.push(await member(hub.url, root, `m${i}`));
  const post = async (from: string, to: Identity) => {
    // Just under 1 MiB each: two fit one sender's 2 MiB share, a third does not.
    const envelope = fake(to.aid, MIB - KIB);
    const ex = open(hub.url, '/relay/v2/send', { headers: { 'x-forwarded-for': from }, declared: envelope.length });
    ex.req.end(envelope);
    await until(() => ex.state.status !== 0, 'an answer');
    return ex.state.status === 202 ? ex.state.body.outcome : code(ex);
  };
  const flood = [];
  for (const m of members.slice(0, 3)) flood.push(await post('203.0.113.6', m));
  t.deepEqual(flood, ['queued', 'queued', 'QUEUE_FULL'], 'the sender reaches its share of the queue');
  t.is(await post('198.51.100.1', members[3]!), 'queued', 'another sender still queues');
});

// --- item 5: bodies of the other routes -----------------------------------------------------------------

test('SPEC §11 (hostile): a body over 256 KiB on the other routes is answered 413 TOO_LARGE, declared or chunked', async (t) => {
  const { hub } = await hubAt(t);
  const declared = open(hub.url, '/agents', { declared: 256 * KIB + 1 });
  declared.req.end(Buffer.alloc(256 * KIB + 1, 0x20));
  const chunked = open(hub.url, '/agents');
  void feed(chunked, 300 * KIB).then(() => chunked.req.end());
  await until(() => declared.state.status !== 0 || declared.state.closed, "the declared body's answer");
  await until(() => chunked.state.status !== 0 || chunked.state.closed, "the chunked body's answer");
  for (const ex of [declared, chunked]) {
    t.is(ex.state.status, 413);
    t.like(ex.state.body, { error: { code: 'TOO_LARGE' } });
  }
  t.is((await fetch(`${hub.url}/health`)).status, 200);
});

test('SPEC §11 (hostile): parked bodies on the other routes stay within a global budget and are dropped at their deadline', async (t) => {
  // A deadline long enough for all 8 to have parked first on a loaded machine: one dropped before the
  // last arrived would give its budget back to it (CI once saw only 2 refused at 300 ms).
  const { hub } = await hubAt(t, { trustProxy: true, bodyBytes: 1 * MIB, bodyIdleMs: 2000 });
  // 8 clients (addresses) each park 255 KiB of a declared 256 KiB: 2 MiB against a 1 MiB budget.
  const parked = Array.from({ length: 8 }, (_, i) =>
    open(hub.url, '/agents', { declared: 256 * KIB, headers: { 'x-forwarded-for': `192.0.2.${i + 1}` } }),
  );
  t.teardown(() => {
    for (const s of parked) s.req.destroy();
  });
  await Promise.all(parked.map((s) => feed(s, 255 * KIB)));
  await until(() => parked.every((s) => s.state.status !== 0), 'every parked body to be answered', 500);
  const busy = parked.filter((s) => s.state.status === 503 && code(s) === 'BUSY').length;
  const timedOut = parked.filter((s) => s.state.status === 408 && code(s) === 'BODY_TIMEOUT').length;
  t.true(busy >= 4, `${busy} refused BUSY: the budget holds at most four of them`);
  t.is(busy + timedOut, 8, 'the rest are dropped at their deadline');
  await until(() => hub.bodies.used === 0, 'the budget to be given back');
  t.is((await fetch(`${hub.url}/health`)).status, 200);
});

// --- item 8: the nonce check ----------------------------------------------------------------------------

test('SPEC §11 (hostile): one signed request sent 30 times at once is accepted exactly once', async (t) => {
  const { hub, root } = await hubAt(t);
  const id = await createIdentity(join(root, 'n'), Date.now());
  const body = registerBody(id);
  const headers = { 'content-type': 'application/json', ...signRequest(id.signer, id.aid, 'POST', '/agents', body, Date.now()) };
  const answers = await Promise.all(
    Array.from({ length: 30 }, () =>
      fetch(`${hub.url}/agents`, { method: 'POST', headers, body }).then(async (r) =>
        r.status === 200 ? 'accepted' : (await r.json()).error.code,
      ),
    ),
  );
  t.is(answers.filter((a) => a === 'accepted').length, 1, answers.join(' '));
  t.is(answers.filter((a) => a === 'REPLAYED').length, 29);
});

// --- item 9 (part) ---------------------------------------------------------------------------------------

test('SPEC §11 (hostile): GET // is a 400 with the JSON error, not a 500', async (t) => {
  const { hub } = await hubAt(t);
  for (const path of ['//', '//x/agents', '*']) {
    const ex = open(hub.url, path, { method: 'GET' });
    ex.req.end();
    await until(() => ex.state.status !== 0, `the answer to ${path}`);
    t.is(ex.state.status, 400, path);
    t.like(ex.state.body, { error: { code: 'BAD_REQUEST' } }, path);
  }
});

// --- item 10: admission ---------------------------------------------------------------------------------

test('SPEC §11 (hostile): new AIDs per address are limited (20 a minute by default); others and re-registrations are not', async (t) => {
  let now = Date.now();
  const { hub, root } = await hubAt(t, { trustProxy: true, now: () => now });
  const ids = await Promise.all(Array.from({ length: 22 }, (_, i) => createIdentity(join(root, `a${i}`), Date.now())));
  const from = (ip: string) => ({ 'x-forwarded-for': ip });
  const register = async (id: Identity, ip: string) => {
    const r = await fetch(`${hub.url}/agents`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...from(ip),
        ...signRequest(id.signer, id.aid, 'POST', '/agents', registerBody(id), now),
      },
      body: registerBody(id),
    });
    return r.status === 200 ? 'accepted' : `${r.status} ${(await r.json()).error.code}`;
  };
  const first = [];
  for (const id of ids.slice(0, 21)) first.push(await register(id, '203.0.113.6'));
  t.deepEqual(first.slice(0, 20), Array(20).fill('accepted'));
  t.is(first[20], '429 RATE_LIMITED', 'the 21st new AID in a minute from one address');
  t.is(await register(ids[0]!, '203.0.113.6'), 'accepted', 'a known AID re-registers freely');
  t.is(await register(ids[21]!, '198.51.100.1'), 'accepted', 'another address is not limited');
  now += 61_000;
  t.is(await register(ids[20]!, '203.0.113.6'), 'accepted', 'a minute later');
});

test('SPEC §11 (hostile): with --require-invite a new AID needs a single-use invite (anet hub invite, anet hub-register --invite)', async (t) => {
  const { hub, root } = await hubAt(t, { requireInvite: true, registrationsPerMinute: 0 });
  const hubDir = join(root, 'hub');
  const node = async (name: string) => {
    const dir = join(root, name);
    const init = await runCli(['init', '--data', dir, '--json']);
    await writeFile(join(dir, 'config.json'), JSON.stringify({ hub: hub.url }));
    return { dir, aid: JSON.parse(init.stdout).aid as string };
  };
  const a = await node('a');
  const without = await runCli(['hub-register', '--name', 'a', '--data', a.dir]);
  t.is(without.code, 1);
  t.regex(without.stderr, /^anet: the hub refused: INVITE_REQUIRED: [^\n]+anet hub-register --name NAME --invite TOKEN/);
  const minted = await runCli(['hub', 'invite', '--data', hubDir, '--json']);
  t.is(minted.code, 0, minted.stderr);
  const { token, via } = JSON.parse(minted.stdout);
  t.is(via, 'hub');
  const ok = await runCli(['hub-register', '--name', 'a', '--invite', token, '--data', a.dir]);
  t.is(ok.code, 0, ok.stderr);
  t.is((await new HubClient(hub.url).kel(a.aid)).length > 0, true);
  t.is((await runCli(['profile', 'set', '--description', 'again', '--data', a.dir])).code, 0, 'a registered AID needs no invite again');
  const b = await node('b');
  const reused = await runCli(['hub-register', '--name', 'b', '--invite', token, '--data', b.dir]);
  t.is(reused.code, 1);
  t.regex(reused.stderr, /^anet: the hub refused: BAD_INVITE: [^\n]+$/);
  // One fresh token, 20 new AIDs racing for it: exactly one gets in.
  const race = JSON.parse((await runCli(['hub', 'invite', '--data', hubDir, '--json'])).stdout).token;
  const racers = await Promise.all(Array.from({ length: 20 }, (_, i) => createIdentity(join(root, `r${i}`), Date.now())));
  const answers = await Promise.all(
    racers.map((id) =>
      signed(hub.url, id, 'POST', '/agents', registerBody(id, { invite: race })).then((r) =>
        r.status === 200 ? 'accepted' : r.body.error.code,
      ),
    ),
  );
  t.is(answers.filter((x) => x === 'accepted').length, 1, answers.join(' '));
  t.is(answers.filter((x) => x === 'BAD_INVITE').length, 19);
});

levelDbTest(
  'SPEC §11 (hostile): anet hub invite with no hub running writes the token to its store; the hub honours it after a start',
  async (t) => {
    const root = await tempDir(t);
    const hubDir = join(root, 'hub');
    let hub = await startTestHub({ dataDir: hubDir, port: 0, requireInvite: true });
    await hub.close();
    const minted = await runCli(['hub', 'invite', '--data', hubDir, '--json']);
    t.is(minted.code, 0, minted.stderr);
    const { token, via } = JSON.parse(minted.stdout);
    t.is(via, 'store');
    hub = await startTestHub({ dataDir: hubDir, port: 0, requireInvite: true });
    t.teardown(() => hub.close());
    const id = await createIdentity(join(root, 'n'), Date.now());
    t.is((await signed(hub.url, id, 'POST', '/agents', registerBody(id))).body.error.code, 'INVITE_REQUIRED');
    t.is((await signed(hub.url, id, 'POST', '/agents', registerBody(id, { invite: token }))).status, 200);
  },
);

test('SPEC §11 (hostile): an envelope shorter than any sealed message is refused BAD_ENVELOPE, so tiny ones cannot outgrow the mailbox bounds in memory', async (t) => {
  const { hub } = await hubAt(t);
  const aid = 'bafyreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa';
  const tiny = await fetch(`${hub.url}/relay/v2/send`, { method: 'POST', body: Buffer.from(fake(aid, 10)) });
  t.is(tiny.status, 400);
  t.regex(await tiny.text(), /BAD_ENVELOPE.*at least 272 bytes/);
  const real = await fetch(`${hub.url}/relay/v2/send`, { method: 'POST', body: Buffer.from(fake(aid)) });
  t.is(real.status, 404, 'a full-sized one reaches the recipient check');
});
