// SPEC §11 with hub replicas (issue 19): two replicas of one hub on one PostgreSQL, handing each other
// envelopes over a real nats-server. Replica 1 runs as its own process (so it can be killed with SIGKILL);
// replica 2 runs in the test's process. The provider reaches the hub through a load balancer that prefers
// replica 1; the caller streams from replica 2. Needs nats-server (Debian: apt-get install -y nats-server):
// without it these tests say so in one line and do not run (under CI=true that fails).
import test, { type ExecutionContext } from 'ava';
import { spawn } from 'node:child_process';
import { cp } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { startNet, type Net } from './helpers/net.js';
import { runCli } from './helpers/cli.js';
import { until } from './helpers/wait.js';
import { usePostgres, postgresUrl } from './helpers/postgres.js';
import { natsServer } from './helpers/nats.js';
import { failoverProxy } from './helpers/proxy.js';
import { mint, balanceOf, pricedProvider } from './helpers/payments.js';
import { startHub } from '../src/hub/server.js';
import { createIdentity, loadIdentity, type Identity } from '../src/identity/store.js';
import { HubClient } from '../src/hub-client/client.js';
import { signRequest } from '../src/protocol/hub-auth.js';
import { encodeKel } from '../src/identity/kel.js';
import { signAuthorization } from '../src/protocol/authorization.js';

usePostgres(test);

const HUB_BIN = fileURLToPath(new URL('../dist/src/hub/bin.js', import.meta.url));

interface Replica {
  url: string;
  port: number;
  kill(): Promise<void>;
}

/** `anet-hub start` as its own process on the shared store and bus; killed (SIGKILL) at the end if still running. */
async function childReplica(t: ExecutionContext, dataDir: string, db: string, bus: string): Promise<Replica> {
  const child = spawn(
    process.execPath,
    [HUB_BIN, 'start', '--data', dataDir, '--port', '0', '--db', db, '--bus', bus, '--register-limit', '0'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const kill = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  };
  t.teardown(kill);
  const lines: string[] = [];
  createInterface({ input: child.stderr! }).on('line', (l) => lines.push(l));
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const m = /ready on (http:\/\/[^;]+);/.exec(line);
      if (m) resolve(m[1]!);
    });
    void exited.then(() => reject(new Error(`replica 1 exited before it was ready: ${lines.join('\n')}`)));
  });
  return { url, port: Number(new URL(url).port), kill };
}

interface Replicas {
  net: Net;
  r1: Replica;
  /** The balancer in front of replica 1, then replica 2. */
  balancer: string;
  db: string;
}

/** Replica 2 in this process (the net's hub), replica 1 as a child on a copy of the same identity. */
async function replicas(t: ExecutionContext): Promise<Replicas | null> {
  const nats = await natsServer(t);
  if (!nats) return null;
  const db = await postgresUrl(t);
  const net = await startNet(t, {
    hub: (dataDir, now) => startHub({ dataDir, port: 0, now, db, bus: nats.url, registrationsPerMinute: 0 }),
  });
  // Every replica runs with the same identity: its key files copied, as an operator would.
  const r1Dir = join(net.root, 'replica-1');
  await cp(join(net.root, 'hub', 'keys'), join(r1Dir, 'keys'), { recursive: true });
  await cp(join(net.root, 'hub', 'kel.cbor'), join(r1Dir, 'kel.cbor'));
  const r1 = await childReplica(t, r1Dir, db, nats.url);
  const r2Port = Number(new URL(net.hub.url).port);
  const balancer = (await failoverProxy(t, [r1.port, r2Port])).url;
  return { net, r1, balancer, db };
}

const call = async (dir: string, aid: string, cap: string, args = '{}') => {
  const r = await runCli(['call', aid, cap, '--args', args, '--json', '--data', dir]);
  return { ...JSON.parse(r.stdout || '{}'), code: r.code, stderr: r.stderr };
};

test('SPEC §11, §6.4, §10: across two replicas: find, the extended priced card, a free and a paid call; replica 1 killed mid-stream of 50 calls: the provider reconnects through the balancer, every call completes, none runs twice', async (t) => {
  const set = await replicas(t);
  if (!set) return;
  const { net, r1, balancer } = set;
  const p = await pricedProvider(t, net, [{ id: 'text.echo' }, { id: 'text.paid', price: 4 }]);
  await net.configure(p.dir, { ...p.config, hub: balancer });
  const c = await net.node('c');
  const provider = await net.start(p.dir);
  await net.start(c.dir);
  t.true((await new HubClient(r1.url).health()).aid === net.hub.aid, 'replica 1 serves the same hub identity');

  const found = JSON.parse((await runCli(['find', '--json', '--data', c.dir])).stdout) as { aid: string }[];
  t.true(
    found.some((a) => a.aid === p.aid),
    'the provider, registered through replica 1, is found through replica 2',
  );
  const card = await runCli(['card', p.aid, '--data', c.dir]);
  t.is(card.code, 0, card.stderr);
  t.regex(card.stdout, /paid\s+4 credits/, 'the extended card, priced, came end to end across the replicas');
  t.like(await call(c.dir, p.aid, 'text.echo', '{"n":0}'), { code: 0, state: 'completed', result: { echo: { n: 0 } } });
  await mint(net, c.aid, '100');
  t.like(await call(c.dir, p.aid, 'text.paid', '{"n":1}'), { code: 0, state: 'completed', payment: { status: 'payment-completed' } });
  t.is((await balanceOf(c.dir)).balance, '96');
  t.is((await balanceOf(p.dir)).balance, '4');

  // 50 calls, one after another (a caller runs one call of a capability at a time by default); replica 1
  // (the provider's) dies after the tenth has completed.
  const before = p.ran();
  let done = 0;
  const results: { state?: string; code: number; stderr: string; result?: { echo?: { n?: number } } }[] = [];
  const next = { n: 0 };
  const worker = async () => {
    while (next.n < 50) {
      const n = next.n++;
      results[n] = await call(c.dir, p.aid, 'text.echo', JSON.stringify({ n }));
      done++;
    }
  };
  const workers = worker();
  await until(() => done >= 10, 'ten calls through replica 1');
  await r1.kill();
  await workers;
  for (const [n, r] of results.entries()) {
    t.is(r.code, 0, `call ${n}: ${r.stderr} ${JSON.stringify(r)}`);
    t.is(r.state, 'completed', `call ${n}`);
    t.is(r.result?.echo?.n, n, `call ${n} answered with its own result`);
  }
  t.is(p.ran() - before, 50, 'each call ran exactly once: none lost, none twice');
  t.true(
    net.log(provider).includes('relay stream reconnected'),
    `the provider lost its stream with replica 1 and opened another, through the balancer, on replica 2: ${net.log(provider).join(' | ')}`,
  );
  await t.throwsAsync(new HubClient(r1.url).health(), undefined, 'replica 1 is gone');
});

/** An identity registered through `hub`, with `name`. */
async function registered(net: Net, name: string): Promise<Identity> {
  const dir = join(net.root, name);
  await createIdentity(dir, net.clock.now());
  const id = await loadIdentity(dir);
  await new HubClient(net.hub.url, id).register(name, null);
  return id;
}

test('SPEC §11: 50 holds at once, half through each replica, against a balance for 10: exactly 10 are held; balances + holds = minted; one signed request sent to both replicas is taken once', async (t) => {
  const set = await replicas(t);
  if (!set) return;
  const { net, r1 } = set;
  const payer = await registered(net, 'payer');
  const payee = await registered(net, 'payee');
  await mint(net, payer.aid, '10');
  const auths = Array.from({ length: 50 }, () =>
    signAuthorization(payer, {
      to: payee.aid,
      amount: '1',
      asset: 'credit',
      network: `hub:${net.hub.aid}`,
      taskId: 'task-replicas',
      quoteId: 'quote-replicas',
      nonce: randomBytes(16).toString('hex'),
      validBefore: net.clock.now() + 600_000,
    }),
  );
  const outcomes = await Promise.allSettled(
    auths.map((a, i) => new HubClient(i % 2 ? r1.url : net.hub.url, payee, () => net.clock.now()).hold(a)),
  );
  const held = outcomes.filter((o) => o.status === 'fulfilled').length;
  t.is(held, 10, 'exactly the balance is held, whichever replica took each hold');
  for (const o of outcomes)
    if (o.status === 'rejected') t.regex(String((o.reason as Error).message), /INSUFFICIENT_FUNDS|credits/, 'the others lack funds');
  const totals = await net.hub.ledger.totals();
  t.is(totals.minted, 10n);
  t.is(totals.held, 10n);
  t.is(totals.balances + totals.held, totals.minted);

  // The same signed request (same nonce), sent to both replicas at once: one takes it, the other says REPLAYED.
  const body = Buffer.from(
    JSON.stringify({ kel: Buffer.from(encodeKel(payee.kel.events)).toString('base64'), name: 'payee-2', card: null }),
  );
  const headers = { 'content-type': 'application/json', ...signRequest(payee.signer, payee.aid, 'POST', '/agents', body, Date.now()) };
  const answers = await Promise.all(
    [r1.url, net.hub.url].map((base) =>
      fetch(`${base}/agents`, { method: 'POST', headers, body }).then(async (r) => ({ status: r.status, text: await r.text() })),
    ),
  );
  t.deepEqual(answers.map((a) => a.status).sort(), [200, 401], JSON.stringify(answers));
  t.regex(answers.find((a) => a.status === 401)!.text, /REPLAYED/);
});
