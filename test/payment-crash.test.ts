// SPEC §10, §9.5: "retries after a crash at any step never charge twice". The provider runs as a real
// child process (`anet daemon`) that is killed with SIGKILL at a payment step (ANET_CRASH_AT), then
// started again on the same data dir. The caller must end charged at most once, and the hub's balances
// plus holds must always equal what was minted.
import test, { type ExecutionContext } from 'ava';
import { startNet, type Net } from './helpers/net.js';
import { runCli } from './helpers/cli.js';
import { childDaemon } from './helpers/proc.js';
import { until } from './helpers/wait.js';
import { mint, balanceOf, pricedProvider } from './helpers/payments.js';

async function setup(
  t: ExecutionContext,
): Promise<{ net: Net; p: Awaited<ReturnType<typeof pricedProvider>>; c: { dir: string; aid: string } }> {
  const net = await startNet(t);
  const p = await pricedProvider(t, net, [{ id: 'text.translate', price: 3 }]);
  const c = await net.node('c');
  await net.start(c.dir);
  await mint(net, c.aid, '100');
  return { net, p, c };
}

const callInBackground = (dir: string, aid: string) =>
  runCli(['call', aid, 'text.translate', '--args', '{"text":"hola"}', '--json', '--data', dir]).then((r) => ({
    ...JSON.parse(r.stdout || '{}'),
    code: r.code,
  }));

async function ledgerBalances(t: ExecutionContext, net: Net): Promise<void> {
  const totals = await net.hub.ledger.totals();
  t.is(totals.balances + totals.held, totals.minted, 'balances + holds = minted');
}

test('SPEC §10, §9.5: the provider killed after the hold, before the call ran: the restart releases the hold, the caller is told interrupted and keeps its credits', async (t) => {
  const { net, p, c } = await setup(t);
  const first = await childDaemon(t, p.dir, 'after-hold');
  const result = callInBackground(c.dir, p.aid);
  t.is(await first.exited, -1, 'killed at the crash point');
  t.like(await balanceOf(c.dir), { balance: '97', held: '3' }, 'the hub holds the amount');
  await ledgerBalances(t, net);
  await childDaemon(t, p.dir);
  const r = await result;
  t.like(r, { state: 'failed', reason: 'interrupted', payment: { status: 'payment-failed' } });
  t.is(p.ran(), 0, 'never run');
  t.like(await balanceOf(c.dir), { balance: '100', held: '0' });
  t.is((await balanceOf(p.dir)).balance, '0');
  await ledgerBalances(t, net);
});

test('SPEC §10, §9.5: the provider killed after the capture, before its answer: the restart settles again (same nonce, no second charge) and sends the kept result', async (t) => {
  const { net, p, c } = await setup(t);
  const first = await childDaemon(t, p.dir, 'after-capture');
  const result = callInBackground(c.dir, p.aid);
  t.is(await first.exited, -1, 'killed at the crash point');
  t.like(await balanceOf(c.dir), { balance: '97', held: '0' }, 'captured once');
  await childDaemon(t, p.dir);
  const r = await result;
  t.like(r, { state: 'completed', result: { echo: { text: 'hola' } }, payment: { status: 'payment-completed' } });
  t.regex(r.receipt, /^bafyrei/, 'the receipt verifies with the amount and the hub transaction');
  t.is(p.ran(), 1, 'run once');
  t.like(await balanceOf(c.dir), { balance: '97', held: '0' }, 'charged once');
  t.is((await balanceOf(p.dir)).balance, '3');
  await ledgerBalances(t, net);
});

test('SPEC §10: the caller killed after authorizing, before the payment left: its restart sends the same authorization, paid once', async (t) => {
  const { net, p } = await setup(t);
  // Here the caller is the child process and the provider an in-process daemon.
  const c2 = await net.node('c2');
  await net.start(p.dir);
  const first = await childDaemon(t, c2.dir, 'after-authorize');
  await mint(net, c2.aid, '10');
  const sent = runCli(['call', p.aid, 'text.translate', '--args', '{"text":"x"}', '--json', '--data', c2.dir]);
  t.is(await first.exited, -1, 'killed at the crash point');
  await sent;
  await childDaemon(t, c2.dir);
  let task: { state: string; payment: { status: string } } | undefined;
  const completed = async () => {
    task = JSON.parse((await runCli(['tasks', '--json', '--data', c2.dir])).stdout)[0];
    return task?.state === 'completed';
  };
  await until(completed, 'the task to complete', 500);
  t.like(task, { state: 'completed', payment: { status: 'payment-completed' } });
  t.like(await balanceOf(c2.dir), { balance: '7', held: '0' }, 'charged once');
  await ledgerBalances(t, net);
});
