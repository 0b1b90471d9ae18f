// bench/relay: one-way latency of an envelope through a loopback hub (seal, send, push, open), against a
// plain HTTP POST on loopback measured in the same run. Target (issue "Relay..."): p50 ≤ 5 ms.
import { createServer, request, Agent } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startHub } from '../src/hub/server.js';
import { HubClient } from '../src/hub-client/client.js';
import { RelayClient } from '../src/relay/client.js';
import { sealEnvelope, openEnvelope } from '../src/protocol/envelope.js';
import { generateX25519 } from '../src/protocol/hpke.js';
import { createIdentity } from '../src/identity/store.js';
import { writeFile } from 'node:fs/promises';
import { Node } from '../src/node/node.js';
import { Store } from '../store/db.js';
import { Reader } from '../src/reader/reader.js';
import { Messenger } from '../src/relay/messenger.js';
import { fromBody, toBody } from '../src/protocol/body.js';
import { CARD_REQUEST, CARD_REPLY } from '../src/protocol/messages.js';
import { verifyCard } from '../src/protocol/card/verify.js';
import { pricesOf } from '../src/card/extended.js';

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;

async function plainPost(n: number): Promise<number[]> {
  let arrived: (() => void) | null = null;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      arrived?.();
      res.writeHead(202).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  const agent = new Agent({ keepAlive: true });
  const body = Buffer.alloc(600, 1);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const got = new Promise<void>((r) => (arrived = r));
    let answered!: () => void;
    const done = new Promise<void>((r) => (answered = r));
    const req = request(
      { port, host: '127.0.0.1', method: 'POST', path: '/', agent, headers: { 'content-length': body.length } },
      (res) => {
        res.resume();
        res.on('end', () => answered());
      },
    );
    req.setNoDelay(true);
    req.end(body);
    await got;
    out.push(performance.now() - t0); // one way: until the server has the whole body
    await done;
  }
  agent.destroy();
  server.close();
  return out;
}

/** A loopback hub with two registered identities, and an encryption key for envelopes to bob. */
async function hubAndTwo(name: string) {
  const root = await mkdtemp(join(tmpdir(), `anet-bench-${name}-`));
  const hub = await startHub({ dataDir: join(root, 'hub'), port: 0 });
  const alice = await createIdentity(join(root, 'a'), Date.now());
  const bob = await createIdentity(join(root, 'b'), Date.now());
  await new HubClient(hub.url, alice).register('a', null);
  await new HubClient(hub.url, bob).register('b', null);
  const stop = async () => {
    await hub.close();
    await rm(root, { recursive: true, force: true });
  };
  return { hub, alice, bob, key: generateX25519(), stop };
}

async function throughHub(n: number): Promise<number[]> {
  const { hub, alice, bob, key, stop } = await hubAndTwo('relay');
  const kid = new Uint8Array(16);
  const keys = new Map([[Buffer.from(kid).toString('hex'), key]]);
  let arrived: ((b: Uint8Array) => void) | null = null;
  const receiver = new RelayClient(hub.url, bob, (b) => arrived?.(b));
  await receiver.connect();
  const sender = new RelayClient(hub.url, alice, () => {});
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const got = new Promise<Uint8Array>((r) => (arrived = r));
    const { bytes } = sealEnvelope(
      { aid: alice.aid, ksn: 0, signer: alice.signer },
      { aid: bob.aid, kid, publicKey: key.publicKey },
      { type: 'bench', ix: i, ts: Date.now(), exp: Date.now() + 60_000, body: 'x'.repeat(200) },
    );
    await sender.send(bytes);
    await openEnvelope(await got, { me: bob.aid, keys, now: Date.now(), seen: () => false, kelOf: () => alice.kel });
    out.push(performance.now() - t0);
  }
  sender.close();
  receiver.close();
  await stop();
  return out;
}

/**
 * CPU per send (sender, hub and push to a connected receiver, all in this process), 32 at once: on the
 * upstream, and as POSTs (the hub's upgrade handler taken off, as an older hub would lack it).
 */
async function sendCost(n: number): Promise<{ upstream: number; post: number }> {
  const { hub, alice, bob, key, stop } = await hubAndTwo('sends');
  const receiver = new RelayClient(hub.url, bob, () => {});
  await receiver.connect();
  const { bytes } = sealEnvelope(
    { aid: alice.aid, ksn: 0, signer: alice.signer },
    { aid: bob.aid, kid: new Uint8Array(16), publicKey: key.publicKey },
    { type: 'bench', ix: 0, ts: Date.now(), exp: Date.now() + 600_000, body: 'x'.repeat(300) },
  );
  const upgrades = hub.server.listeners('upgrade') as ((...args: unknown[]) => void)[];
  const cost = async (upstream: boolean) => {
    hub.server.removeAllListeners('upgrade');
    if (upstream) for (const l of upgrades) hub.server.on('upgrade', l);
    const sender = new RelayClient(hub.url, alice, () => {});
    await pool(200, 32, () => sender.send(bytes).then(() => {})); // warm-up, and the upstream opened
    const cpu0 = process.cpuUsage();
    await pool(n, 32, () => sender.send(bytes).then(() => {}));
    const cpu = process.cpuUsage(cpu0);
    sender.close();
    return (cpu.user + cpu.system) / n;
  };
  // Alternated, so a slower stretch of the machine does not fall on one kind only.
  const runs = { upstream: [] as number[], post: [] as number[] };
  for (let i = 0; i < 3; i++) {
    runs.post.push(await cost(false));
    runs.upstream.push(await cost(true));
  }
  receiver.close();
  await stop();
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[1]!;
  return { upstream: median(runs.upstream), post: median(runs.post) };
}

/** `total` POSTs of a card-sized body, `concurrency` at once, answered with a card-sized body: requests/s. */
async function plainPostThroughput(total: number, concurrency: number): Promise<number> {
  const answer = Buffer.alloc(2048, 1);
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-length': answer.length }).end(answer));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const body = Buffer.alloc(600, 1);
  const one = () =>
    new Promise<void>((resolve) => {
      const req = request(
        { port, host: '127.0.0.1', method: 'POST', path: '/', agent, headers: { 'content-length': body.length } },
        (res) => {
          res.resume();
          res.on('end', () => resolve());
        },
      );
      req.end(body);
    });
  const t0 = performance.now();
  await pool(total, concurrency, one);
  const perSec = total / ((performance.now() - t0) / 1000);
  agent.destroy();
  server.close();
  return perSec;
}

async function pool(total: number, concurrency: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) await task(next++);
    }),
  );
}

/**
 * Extended-card fetches through a loopback hub: a real provider node (reply limiter, card build, signing)
 * answering requesters that each stay under its six per minute, every reply verified as a reader does.
 */
async function cardFetchThroughput(total: number, concurrency: number): Promise<number> {
  const root = await mkdtemp(join(tmpdir(), 'anet-bench-cards-'));
  // Many requesters register from loopback: the hub's per-address limit on new AIDs is off for the bench.
  const hub = await startHub({ dataDir: join(root, 'hub'), port: 0, registrationsPerMinute: 0 });
  const pdir = join(root, 'provider');
  await createIdentity(pdir, Date.now());
  await writeFile(
    join(pdir, 'config.json'),
    JSON.stringify({
      hub: hub.url,
      inbound: { public_capabilities: [{ id: 'text.summarize' }, { id: 'text.translate' }] },
      modules: {
        service: {
          capabilities: [
            { id: 'text.summarize', url: 'unix:///run/anet-bench/s.sock', price: 5, description: 'Summarise a plain-text document.' },
            { id: 'text.translate', url: 'unix:///run/anet-bench/t.sock', price: 3, description: 'Translate text between two languages.' },
          ],
        },
      },
    }),
  );
  const provider = await Node.open(pdir, { runtime: true });
  await provider.publish();
  await provider.network();
  const store = await Store.open(join(root, 'requesters'));
  const waiting = new Map<string, (body: Record<string, unknown>) => void>();
  const perPeer = 5;
  const peers: Messenger[] = [];
  for (let i = 0; i < Math.ceil(total / perPeer); i++) {
    const dir = join(root, `r${i}`);
    const id = await createIdentity(dir, Date.now());
    const client = new HubClient(hub.url, id);
    await client.register(`r${i}`, null);
    const m = new Messenger({
      dataDir: dir,
      identity: id,
      hub: hub.url,
      client,
      reader: new Reader(store, client),
      store,
      now: Date.now,
      log: () => {},
    });
    m.on(CARD_REPLY, (msg) => {
      const body = fromBody(msg.body)!;
      waiting.get(body.rid as string)?.(body);
    });
    await m.start();
    peers.push(m);
  }
  const kel = provider.identity.kel;
  const t0 = performance.now();
  await pool(total, concurrency, async (i) => {
    const rid = `f${i}`;
    const replied = new Promise<Record<string, unknown>>((r) => waiting.set(rid, r));
    await peers[Math.floor(i / perPeer)]!.send(provider.identity.aid, CARD_REQUEST, toBody({ kind: 'general', rid }));
    const body = await replied;
    waiting.delete(rid);
    const check = verifyCard(body.card as string, { kel, now: Date.now() });
    if (!check.ok || 'error' in pricesOf(check.card)) throw new Error('a fetched card did not verify');
  });
  const perSec = total / ((performance.now() - t0) / 1000);
  for (const m of peers) m.close();
  await store.close();
  await provider.close();
  await hub.close();
  await rm(root, { recursive: true, force: true });
  return perSec;
}

export async function benchRelay(n: number): Promise<boolean> {
  console.log(`bench/relay (node ${process.version}, ${n} messages one after another)`);
  await plainPost(50); // warm-up
  const base = await plainPost(n);
  const relay = await throughHub(n);
  const row = (label: string, xs: number[], ratio: string, target = '', ok = true) =>
    console.log(
      `${label.padEnd(40)} p50 ${pct(xs, 50).toFixed(2).padStart(6)} ms  p99 ${pct(xs, 99).toFixed(2).padStart(6)} ms  ${ratio.padEnd(16)} ${target.padEnd(12)} ${ok ? 'ok' : 'MISSED'}`,
    );
  row('baseline: plain HTTP POST, loopback', base, '1.00x');
  const ok = pct(relay, 50) <= 5;
  row('envelope through the hub (one way)', relay, `${(pct(relay, 50) / pct(base, 50)).toFixed(2)}x p50`, 'p50 <= 5 ms', ok);
  const sends = await sendCost(n);
  console.log(
    `${'baseline: send as a POST, 32 at once'.padEnd(40)} ${sends.post.toFixed(0).padStart(7)} us CPU a send (sender, hub, push)  1.00x`,
  );
  console.log(
    `${'send on the upstream, 32 at once'.padEnd(40)} ${sends.upstream.toFixed(0).padStart(7)} us CPU a send                        ${(sends.upstream / sends.post).toFixed(2)}x`,
  );
  const fetches = Math.max(200, Math.floor(n / 2));
  const posts = await plainPostThroughput(fetches, 32);
  const cards = await cardFetchThroughput(fetches, 32);
  console.log(`${'baseline: plain HTTP POST, 32 at once'.padEnd(40)} ${posts.toFixed(0).padStart(7)} req/s   1.00x`);
  console.log(
    `${'extended-card fetch, 32 at once'.padEnd(40)} ${cards.toFixed(0).padStart(7)} /s      ${(cards / posts).toFixed(3)}x  (request, limiter, build, sign, seal, relay, open, verify)`,
  );
  return ok;
}
