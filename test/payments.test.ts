// SPEC §10 (payments over the hub ledger), end to end between real daemons through a real hub: the
// signed quote, the caller's auto-pay rule, `anet pay` / `anet reject`, hold → run → capture or
// release by outcome, receipts naming amount and hub transaction, and ledger totals that always equal
// what was minted.
import test, { type ExecutionContext } from 'ava';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { startNet, type Net } from './helpers/net.js';
import { runCli } from './helpers/cli.js';
import { startSampleService, echoHandler, type SampleHandler } from '../src/service/sample.js';
import { HubClient } from '../src/hub/client.js';
import { loadIdentity } from '../src/identity/store.js';

export async function mint(net: Net, aid: string, amount: string): Promise<void> {
  const hubIdentity = await loadIdentity(join(net.root, 'hub'));
  await new HubClient(net.hub.url, hubIdentity, () => net.clock.now()).mint(aid, amount, randomBytes(16).toString('hex'));
}

export async function balanceOf(dir: string): Promise<{ balance: string; held: string }> {
  const r = await runCli(['balance', '--json', '--data', dir]);
  if (r.code !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout);
}

/** A provider serving `caps` (id, price) from one sample service on a Unix socket. */
export async function pricedProvider(t: ExecutionContext, net: Net, caps: { id: string; price?: number }[], handler: SampleHandler = echoHandler, name = 'p') {
  const run = join(net.root, `run-${name}`);
  await mkdir(run, { mode: 0o700 });
  let ran = 0;
  const service = await startSampleService(join(run, 'svc.sock'), (body, req, res) => {
    ran++;
    return handler(body, req, res);
  });
  t.teardown(() => service.close());
  const config = {
    inbound: { policy: 'open', public_capabilities: caps.map((c) => ({ id: c.id })) },
    modules: { service: { capabilities: caps.map((c) => ({ id: c.id, url: `unix://${service.socketPath}`, ...(c.price ? { price: c.price } : {}) })) } },
  };
  const p = await net.node(name, config);
  return { ...p, config, ran: () => ran };
}

const call = async (dir: string, aid: string, cap: string, args = '{}') => {
  const r = await runCli(['call', aid, cap, '--args', args, '--json', '--data', dir]);
  return { ...JSON.parse(r.stdout || '{}'), code: r.code, stderr: r.stderr };
};

test('SPEC §10: a quote within the signed price is paid automatically: held, run, captured; the receipt names amount and hub transaction', async (t) => {
  const net = await startNet(t);
  const p = await pricedProvider(t, net, [{ id: 'text.translate', price: 3 }, { id: 'text.free' }]);
  const c = await net.node('c');
  await net.start(p.dir);
  await net.start(c.dir);
  await mint(net, c.aid, '100');
  const r = await call(c.dir, p.aid, 'text.translate', '{"text":"bonjour"}');
  t.is(r.code, 0, r.stderr);
  t.like(r, { state: 'completed', result: { echo: { text: 'bonjour' } }, payment: { status: 'payment-completed', auto: true, quote: { amount: '3', payTo: p.aid } } });
  t.regex(r.receipt, /^bafyrei/, 'the receipt verified, with the captured amount and hub transaction in it');
  t.regex(r.payment.hubTx, /^tx_/);
  t.is(r.payment.price.amount, '3', 'checked against the signed extended card');
  t.is((await balanceOf(c.dir)).balance, '97');
  t.is((await balanceOf(p.dir)).balance, '3');
  const totals = await net.hub.ledger.totals();
  t.is(totals.balances + totals.held, totals.minted);
  const free = await call(c.dir, p.aid, 'text.free');
  t.like(free, { state: 'completed', payment: null }, 'a free skill of the same provider is not charged');
  t.is((await balanceOf(c.dir)).balance, '97');
  const text = await runCli(['task', r.task, '--data', c.dir]);
  t.regex(text.stdout, /paid 3 credits \(hub transaction tx_/);
});
