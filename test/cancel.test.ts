// Issue 21 (PROTOCOL §6.8, SPEC §9.1, §10): a caller cancels a task while it runs. Real daemons on a
// real hub, real services on Unix sockets: the service sees its request aborted, a payment held for it is
// released, and both sides end `canceled` — the caller's record and the provider's journal alike.
import test from 'ava';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { runCli } from './helpers/cli.js';
import { until } from './helpers/wait.js';
import { balanceOf, market } from './helpers/payments.js';
import { operate } from '../src/node/operations.js';

/** A service that answers only `{"quick": true}` calls, and records the others' requests and their aborts. */
function slowService() {
  const seen = { requests: 0, aborted: 0 };
  const handler = (body: unknown, _req: IncomingMessage, res: ServerResponse) => {
    if ((body as { quick?: boolean })?.quick) return { done: true };
    seen.requests++;
    // The node closes the connection when the call is canceled: the one sign a service gets.
    res.on('close', () => {
      if (!res.writableEnded) seen.aborted++;
    });
    return new Promise(() => {});
  };
  return { seen, handler };
}

test('issue 21 / SPEC §10: anet cancel of a running paid call aborts its service request, releases the hold, and both sides end canceled', async (t) => {
  const slow = slowService();
  const { net, p, c, provider, caller } = await market(t, [{ id: 'slow.job', price: 5 }], { handler: slow.handler, credits: '100' });
  const sent = await operate(caller.node, 'call', { aid: p.aid, capability: 'slow.job', args: '{}', files: [], waitMs: 200 });
  await until(() => slow.seen.requests === 1, 'the service has the request', 500);
  t.like(await balanceOf(c.dir), { balance: '95', held: '5' }, 'paid automatically: the amount is held while it runs');
  const r = await runCli(['cancel', sent.task, '--json', '--data', c.dir]);
  t.is(r.code, 0, r.stderr);
  t.like(JSON.parse(r.stdout), { task: sent.task, state: 'canceled', reason: 'canceled', payment: { status: 'payment-failed' } });
  t.is(slow.seen.aborted, 1, 'the service saw its request aborted');
  t.like(await balanceOf(c.dir), { balance: '100', held: '0' }, 'the hold was released');
  t.is((await balanceOf(p.dir)).balance, '0');
  const totals = await net.hub.ledger.totals();
  t.is(totals.balances + totals.held, totals.minted);
  t.is(totals.held, 0n);
  // The provider's journal says so, and replays to its snapshots.
  const state = await (await provider.node.actors()).state(`call/${c.aid}/${sent.task}`);
  t.like(state, { value: 'canceled', context: { reason: 'canceled', settled: 'released' } });
  for (const d of [provider, caller]) await d.close();
  for (const dir of [p.dir, c.dir]) {
    const verified = await runCli(['replay', '--verify', '--data', dir]);
    t.is(verified.code, 0, verified.stderr);
  }
});

test('issue 21 / SPEC §9.1: cancel of a running free call; a task that has ended cannot be canceled, one line says why', async (t) => {
  const slow = slowService();
  const { p, c, provider, caller } = await market(t, [{ id: 'slow.job' }], { handler: slow.handler });
  const sent = await operate(caller.node, 'call', { aid: p.aid, capability: 'slow.job', args: '{}', files: [], waitMs: 100 });
  await until(() => slow.seen.requests === 1, 'the service has the request', 500);
  const canceled = await operate(caller.node, 'cancel', { task: sent.task });
  t.like(canceled, { state: 'canceled', reason: 'canceled' });
  t.regex(canceled.explanation!, /^The caller canceled the task while it ran/);
  t.is(slow.seen.aborted, 1);
  t.like(await (await provider.node.actors()).state(`call/${c.aid}/${sent.task}`), { value: 'canceled' });
  // The in-flight slot was given back: the next call runs.
  const quick = await operate(caller.node, 'call', {
    aid: p.aid,
    capability: 'slow.job',
    args: '{"quick":true}',
    files: [],
    waitMs: 10_000,
  });
  t.like(quick, { state: 'completed', result: { done: true } });
  const again = await runCli(['cancel', quick.task, '--data', c.dir]);
  t.is(again.code, 1);
  t.is(again.stderr, `anet: task ${quick.task} is completed: it has ended`);
  const unknown = await runCli(['cancel', 'feedfeedfeedfeed', '--data', c.dir]);
  t.is(unknown.code, 1);
  t.regex(unknown.stderr, /^anet: no task feedfeedfeedfeed \(see `anet tasks`\)$/);
});

test('issue 21 / SPEC §10: cancel of a quote left to the operator declines it, as anet reject does', async (t) => {
  // auto_max 0: every quote waits for the operator.
  const { p, c, caller } = await market(t, [{ id: 'text.translate', price: 3 }], { caller: { payments: { auto_max: 0 } }, credits: '10' });
  const quoted = await operate(caller.node, 'call', { aid: p.aid, capability: 'text.translate', args: '{}', files: [], waitMs: 10_000 });
  t.is(quoted.state, 'input-required');
  const r = await operate(caller.node, 'cancel', { task: quoted.task });
  t.like(r, { state: 'canceled', reason: 'payment_rejected' });
  t.like(await balanceOf(c.dir), { balance: '10', held: '0' });
});
