// bench/relay: one-way latency of an envelope through a loopback hub (seal, send, push, open), against a
// plain HTTP POST on loopback measured in the same run. Target (issue "Relay..."): p50 ≤ 5 ms.
import { createServer, request, Agent } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startHub } from '../src/hub/server.js';
import { HubClient } from '../src/hub/client.js';
import { RelayClient } from '../src/relay/client.js';
import { sealEnvelope, openEnvelope } from '../src/relay/envelope.js';
import { generateX25519 } from '../src/relay/hpke.js';
import { createIdentity } from '../src/identity/store.js';

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
    const req = request({ port, host: '127.0.0.1', method: 'POST', path: '/', agent, headers: { 'content-length': body.length } }, (res) => {
      res.resume();
      res.on('end', () => answered());
    });
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

async function throughHub(n: number): Promise<number[]> {
  const root = await mkdtemp(join(tmpdir(), 'anet-bench-relay-'));
  const hub = await startHub({ dataDir: join(root, 'hub'), port: 0 });
  const alice = await createIdentity(join(root, 'a'), Date.now());
  const bob = await createIdentity(join(root, 'b'), Date.now());
  await new HubClient(hub.url, alice).register('a', null);
  await new HubClient(hub.url, bob).register('b', null);
  const key = generateX25519();
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
    const { bytes } = sealEnvelope({ aid: alice.aid, ksn: 0, signer: alice.signer }, { aid: bob.aid, kid, publicKey: key.publicKey }, { type: 'bench', ix: i, ts: Date.now(), exp: Date.now() + 60_000, body: 'x'.repeat(200) });
    await sender.send(bytes);
    await openEnvelope(await got, { me: bob.aid, keys, now: Date.now(), seen: () => false, kelOf: () => alice.kel });
    out.push(performance.now() - t0);
  }
  sender.close();
  receiver.close();
  await hub.close();
  await rm(root, { recursive: true, force: true });
  return out;
}

export async function benchRelay(n: number): Promise<boolean> {
  console.log(`bench/relay (node ${process.version}, ${n} messages one after another)`);
  await plainPost(50); // warm-up
  const base = await plainPost(n);
  const relay = await throughHub(n);
  const row = (label: string, xs: number[], ratio: string, target = '', ok = true) =>
    console.log(`${label.padEnd(40)} p50 ${pct(xs, 50).toFixed(2).padStart(6)} ms  p99 ${pct(xs, 99).toFixed(2).padStart(6)} ms  ${ratio.padEnd(16)} ${target.padEnd(12)} ${ok ? 'ok' : 'MISSED'}`);
  row('baseline: plain HTTP POST, loopback', base, '1.00x');
  const ok = pct(relay, 50) <= 5;
  row('envelope through the hub (one way)', relay, `${(pct(relay, 50) / pct(base, 50)).toFixed(2)}x p50`, 'p50 <= 5 ms', ok);
  return ok;
}
