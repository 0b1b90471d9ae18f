// SPEC §10 (payments over the hub ledger), end to end between real daemons through a real hub: the
// signed quote, the caller's auto-pay rule, `anet pay` / `anet reject`, hold → run → capture or
// release by outcome, receipts naming amount and hub transaction, and ledger totals that always equal
// what was minted.
import test from 'ava';
import { startNet, type Net } from './helpers/net.js';
import { runCli } from './helpers/cli.js';
import { until } from './helpers/wait.js';
import { mint, balanceOf, market } from './helpers/payments.js';
import { join } from 'node:path';
import { rawPeer } from './helpers/net.js';
import { createIdentity, loadIdentity } from '../src/identity/store.js';
import { HubClient } from '../src/hub-client/client.js';
import { fromBody, toBody } from '../src/protocol/body.js';
import { TASK_SEND, TASK_STATUS } from '../src/protocol/messages.js';
import { paymentRequired, signQuote } from '../src/protocol/quote.js';
import { X402_STATUS, X402_REQUIRED, QUOTE_SIGNATURE } from '../src/protocol/messages.js';
import { EXT_PRICE } from '../src/protocol/card/constants.js';

const call = async (dir: string, aid: string, cap: string, args = '{}') => {
  const r = await runCli(['call', aid, cap, '--args', args, '--json', '--data', dir]);
  return { ...JSON.parse(r.stdout || '{}'), code: r.code, stderr: r.stderr };
};

test('SPEC §10: a quote within the signed price is paid automatically: held, run, captured; the receipt names amount and hub transaction', async (t) => {
  const {
    net,
    p,
    c,
    provider: providerDaemon,
    caller: callerDaemon,
  } = await market(t, [{ id: 'text.translate', price: 3 }, { id: 'text.free' }], { credits: '100' });
  const daemons = [providerDaemon, callerDaemon];
  const r = await call(c.dir, p.aid, 'text.translate', '{"text":"bonjour"}');
  t.is(r.code, 0, r.stderr);
  t.like(r, {
    state: 'completed',
    result: { echo: { text: 'bonjour' } },
    payment: { status: 'payment-completed', auto: true, quote: { amount: '3', payTo: p.aid } },
  });
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
  // SPEC §14: both journals replay to their snapshots, and show every payment step.
  for (const d of daemons) await d.close();
  for (const dir of [p.dir, c.dir]) {
    const verified = await runCli(['replay', '--verify', '--data', dir]);
    t.is(verified.code, 0, verified.stderr);
    t.regex(verified.stdout, / 0 difference\(s\)/);
  }
  const provider = await runCli(['replay', '--actor', `call/${c.aid}/${r.task}`, '--data', p.dir]);
  t.is(provider.code, 0, provider.stderr);
  t.regex(
    provider.stdout,
    /RECEIVED[\s\S]*QUOTED: submitted -> quoted[\s\S]*PAY: quoted -> paying[\s\S]*HELD: paying -> working[\s\S]*COMPLETED: working -> settling[\s\S]*SETTLED: settling -> completed/,
  );
  const caller = await runCli(['replay', '--actor', `payment/${p.aid}/${r.task}`, '--data', c.dir]);
  t.is(caller.code, 0, caller.stderr);
  t.regex(caller.stdout, /QUOTE: new -> quoted[\s\S]*AUTHORIZE: quoted -> authorized[\s\S]*SETTLED: authorized -> completed/);
});

/**
 * The stopped provider `p` changes its price and publishes that new card version without its daemon, so
 * the caller's next look asks and gets no answer (10 s on the test clock): what that look printed.
 */
async function supersede(
  net: Net,
  p: { dir: string; aid: string; config: { modules: { service: { capabilities: { price?: number }[] } } } },
  callerDir: string,
  price: number,
  flags: string[],
) {
  p.config.modules.service.capabilities[0]!.price = price;
  await net.configure(p.dir, p.config);
  const published = await runCli(['hub-register', '--name', 'p', '--data', p.dir]);
  if (published.code !== 0) throw new Error(published.stderr);
  const before = net.envelopes();
  const look = runCli(['card', p.aid, ...flags, '--data', callerDir]);
  await until(() => net.envelopes() - before === 1, 'the request for the new card');
  net.clock.advance(10_000);
  return look;
}

test('SPEC §10: a quote above the signed price waits for the operator (quote_above_price); anet pay then pays it', async (t) => {
  const { net, p, c, provider: started } = await market(t, [{ id: 'text.translate', price: 3 }], { credits: '100' });
  let provider = started;
  // The caller holds the card signed at 3 credits. The provider raises its price to 5, which is a new card
  // version (SPEC §5.1), published while its daemon is down, so the caller's fetch of it gets no answer:
  // within the 60 s guard the caller judges quotes by the last card the provider signed for it (3).
  t.regex((await runCli(['card', p.aid, '--data', c.dir])).stdout, /translate\s+3 credits/);
  await provider.close();
  const look = await supersede(net, p, c.dir, 5, []);
  t.regex(look.stdout, /translate\s+3 credits[\s\S]*newest extended card could not be obtained/);
  provider = await net.start(p.dir);
  const waiting = await runCli(['call', p.aid, 'text.translate', '--args', '{"a":1}', '--data', c.dir]);
  t.is(waiting.code, 1);
  t.regex(
    waiting.stdout,
    /waits for payment: 5 credits to \S+ for text.translate[\s\S]*not paid automatically: the quote \(5\) is above the signed price \(3\)[\s\S]*anet pay [0-9a-f]+/,
  );
  const task = JSON.parse((await runCli(['tasks', '--json', '--data', c.dir])).stdout)[0];
  t.like(task, { state: 'input-required', reason: 'quote_above_price', payment: { status: 'payment-required', auto: false } });
  t.is(p.ran(), 0, 'nothing runs before the payment');
  t.is((await balanceOf(c.dir)).balance, '100');
  const paid = await runCli(['pay', task.task, '--json', '--data', c.dir]);
  t.is(paid.code, 0, paid.stderr);
  t.like(JSON.parse(paid.stdout), { state: 'completed', payment: { status: 'payment-completed', auto: false } });
  t.is((await balanceOf(c.dir)).balance, '95');
  t.is((await balanceOf(p.dir)).balance, '5');
  const again = await runCli(['pay', task.task, '--data', c.dir]);
  t.is(again.code, 1, 'a task is paid once');
  t.regex(again.stderr, /is completed, not waiting for a payment/);
});

test('SPEC §10, §2.3: above payments.auto_max the operator decides; anet reject cancels the task on both sides and nothing is paid', async (t) => {
  const { p, c, provider } = await market(t, [{ id: 'img.render', price: 30 }], { caller: { payments: { auto_max: 10 } }, credits: '100' });
  const r = await call(c.dir, p.aid, 'img.render');
  t.like(r, { state: 'input-required', reason: 'payment_required', payment: { auto: false, price: { amount: '30' } } });
  t.regex(r.payment.why, /above payments.auto_max \(10\)/);
  const rejected = await runCli(['reject', r.task, '--data', c.dir]);
  t.is(rejected.code, 0, rejected.stderr);
  t.like(JSON.parse((await runCli(['task', r.task, '--json', '--data', c.dir])).stdout), {
    state: 'canceled',
    reason: 'payment_rejected',
    payment: { status: 'payment-rejected' },
  });
  const actor = `call/${c.aid}/${r.task}`;
  await until(async () => (await provider.node.host!.state(actor))?.value === 'canceled', 'the provider to cancel the call');
  t.is(p.ran(), 0);
  t.is((await balanceOf(c.dir)).balance, '100');
});

test('SPEC §10, §2.3: automatic payments stop at payments.daily_max within any 24 h, then resume as the window moves on', async (t) => {
  const { net, p, c } = await market(t, [{ id: 'text.translate', price: 4 }], { caller: { payments: { daily_max: 10 } }, credits: '100' });
  t.like(await call(c.dir, p.aid, 'text.translate'), { state: 'completed', payment: { auto: true } });
  t.like(await call(c.dir, p.aid, 'text.translate'), { state: 'completed', payment: { auto: true } });
  const third = await call(c.dir, p.aid, 'text.translate');
  t.like(third, { state: 'input-required', payment: { auto: false } });
  t.regex(third.payment.why, /past payments.daily_max \(10\) in 24 h/);
  net.clock.advance(24 * 3_600_000);
  t.like(
    JSON.parse((await runCli(['task', third.task, '--json', '--data', c.dir])).stdout),
    { state: 'failed', reason: 'quote_expired' },
    'an unanswered quote ends with its deadline',
  );
  t.is((await runCli(['reject', third.task, '--data', c.dir])).code, 1, 'nothing is left to reject');
  t.like(await call(c.dir, p.aid, 'text.translate'), { state: 'completed', payment: { auto: true } }, '24 h after the first payment');
  t.is((await balanceOf(c.dir)).balance, '88');
});

test('SPEC §10, §3.1: a paid call that fails is released (not charged); one whose outcome is unknown is captured', async (t) => {
  const { p, c } = await market(
    t,
    [
      { id: 'svc.broken', price: 7 },
      { id: 'svc.gateway', price: 2 },
    ],
    {
      handler: (_body, req, res) => {
        res.writeHead(req.headers['x-anet-capability'] === 'svc.broken' ? 500 : 504, { 'content-type': 'application/json' });
        res.end('{}');
      },
      credits: '50',
    },
  );
  const broken = await call(c.dir, p.aid, 'svc.broken');
  t.like(broken, { state: 'failed', reason: 'service_error', payment: { status: 'payment-failed', auto: true } });
  t.is((await balanceOf(c.dir)).balance, '50', 'released: the caller keeps its credits');
  const unknown = await call(c.dir, p.aid, 'svc.gateway');
  t.like(unknown, { state: 'failed', reason: 'outcome_unknown', payment: { status: 'payment-completed' } });
  t.is((await balanceOf(c.dir)).balance, '48', 'outcome unknown: captured, as SPEC §10 says');
  t.is((await balanceOf(p.dir)).balance, '2');
});

test('SPEC §10: without the credits the hold is refused: the call never runs and nothing is charged', async (t) => {
  const { net, p, c } = await market(t, [{ id: 'paid.thing', price: 5 }], { credits: '4' });
  const r = await call(c.dir, p.aid, 'paid.thing');
  t.like(r, {
    state: 'failed',
    reason: 'settlement_failed',
    detail: 'the hub refused: INSUFFICIENT_FUNDS',
    payment: { status: 'payment-failed' },
  });
  t.is(p.ran(), 0);
  t.is((await balanceOf(c.dir)).balance, '4');
  const totals = await net.hub.ledger.totals();
  t.is(totals.held, 0n);
});

test('SPEC §6.2, §10 (hostile): a quote within the price of a superseded card is not paid automatically (the provider may have taken that price back)', async (t) => {
  const { net, p, c, provider: started } = await market(t, [{ id: 'text.translate', price: 5 }], { credits: '100' });
  t.regex((await runCli(['card', p.aid, '--data', c.dir])).stdout, /translate\s+5 credits/);
  await started.close();
  const look = await supersede(net, p, c.dir, 3, ['--json']);
  t.like(JSON.parse(look.stdout), { stale: true, reason: 'card_stale' });
  await net.start(p.dir);
  const r = await runCli(['call', p.aid, 'text.translate', '--args', '{"a":1}', '--data', c.dir]);
  t.is(r.code, 1);
  const task = JSON.parse((await runCli(['tasks', '--json', '--data', c.dir])).stdout)[0];
  t.like(task, {
    state: 'input-required',
    reason: 'payment_required',
    payment: { auto: false, price: { seq: '1', stale: true, publicSeq: '2' } },
  });
  t.regex(task.payment.why, /newest signed prices could not be obtained/);
  t.is((await balanceOf(c.dir)).balance, '100');
});

test('SPEC §10: only a price the provider signed counts: a quote not signed by the provider is refused and cannot be paid; a price the hub forged is never a reason to pay', async (t) => {
  const net = await startNet(t);
  const c = await net.node('c');
  await net.start(c.dir);
  await mint(net, c.aid, '100');
  const peer = await rawPeer(t, net, 'raw-provider');
  const forger = await loadIdentity(
    await (async () => {
      const dir = join(net.root, 'forger');
      await createIdentity(dir, net.clock.now());
      return dir;
    })(),
  );
  const hubAid = (await new HubClient(net.hub.url).health()).aid;
  let signer = forger;
  peer.messenger.on(TASK_SEND, async (m) => {
    const task = String(fromBody(m.body)!.task);
    const required = paymentRequired({
      network: `hub:${hubAid}`,
      amount: '3',
      payTo: peer.aid,
      skillId: 'text.translate',
      taskId: task,
      quoteId: 'q'.repeat(32),
    });
    await peer.messenger.send(
      m.from,
      TASK_STATUS,
      toBody({
        task,
        state: 'input-required',
        reason: 'payment_required',
        [X402_STATUS]: 'payment-required',
        [X402_REQUIRED]: JSON.stringify(required),
        [QUOTE_SIGNATURE]: signQuote(signer, required),
      }),
    );
  });
  const forged = await call(c.dir, peer.aid, 'text.translate');
  t.like(forged, {
    state: 'input-required',
    payment: { auto: false, quote: null, quoteError: "the quote is not signed with the provider's current key" },
  });
  const pay = await runCli(['pay', forged.task, '--data', c.dir]);
  t.is(pay.code, 1);
  t.regex(pay.stderr, /cannot be paid: the quote is not signed/);

  // Now a genuine quote, and a hub that shows a card "with the price" for this agent: the caller reads no
  // price from the hub; without the provider's own signed extended card nothing is paid automatically.
  signer = peer.identity;
  const rec = await net.hub.storage.agents.get(peer.aid);
  const card = JSON.stringify({
    name: 'raw',
    skills: [{ id: 'text.translate' }],
    capabilities: {
      extensions: [
        { uri: EXT_PRICE, params: { network: `hub:${hubAid}`, asset: 'credit', prices: [{ skillId: 'text.translate', amount: '3' }] } },
      ],
    },
  });
  await net.hub.storage.agents.put({ ...rec!, card, seq: '1', digest: 'forged' });
  const genuine = await call(c.dir, peer.aid, 'text.translate');
  t.like(genuine, { state: 'input-required', payment: { auto: false, quoteError: null, price: null } });
  t.regex(genuine.payment.why, /no signed price to check the quote against: its public card does not verify/);
  t.is((await balanceOf(c.dir)).balance, '100');
});

test('SPEC §5.1, §11: the public card and the hub directory never carry a price, and the ledger never learns what a payment bought', async (t) => {
  const { net, p, c } = await market(
    t,
    [
      { id: 'text.translate', price: 3 },
      { id: 'text.summarize', price: 9 },
    ],
    { credits: '100' },
  );
  t.like(await call(c.dir, p.aid, 'text.translate'), { state: 'completed' });
  const listed = JSON.parse((await runCli(['find', '--json', '--data', c.dir])).stdout).find((a: { aid: string }) => a.aid === p.aid);
  t.truthy(listed, 'the provider is in the directory');
  const fromHub = await new HubClient(net.hub.url).card(p.aid);
  const search = JSON.stringify(await new HubClient(net.hub.url).search({}));
  for (const text of [fromHub, search]) {
    t.false(text.includes(EXT_PRICE), 'no anet-price extension');
    t.false(/"amount"|"price"/.test(text), 'no amount or price field');
  }
  const account = JSON.stringify(await balanceOf(p.dir));
  t.regex(account, /"amount":"3"/, 'the ledger holds the amount ...');
  t.false(account.includes('text.translate'), '... never the capability it paid for');
});

test('SPEC §10, §2.3: a released automatic payment spends nothing of payments.daily_max', async (t) => {
  const { p, c } = await market(
    t,
    [
      { id: 'svc.broken', price: 4 },
      { id: 'svc.ok', price: 4 },
    ],
    {
      handler: (body, req, res) => {
        if (req.headers['x-anet-capability'] === 'svc.ok') return { ok: body };
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end('{}');
      },
      caller: { payments: { daily_max: 10 } },
      credits: '100',
    },
  );
  for (let i = 0; i < 2; i++)
    t.like(await call(c.dir, p.aid, 'svc.broken'), { state: 'failed', payment: { status: 'payment-failed', auto: true } });
  t.like(await call(c.dir, p.aid, 'svc.ok'), { state: 'completed', payment: { auto: true } });
  t.like(await call(c.dir, p.aid, 'svc.ok'), { state: 'completed', payment: { auto: true } }, '8 paid of 10: the released 8 did not count');
  t.like(await call(c.dir, p.aid, 'svc.ok'), { state: 'input-required', payment: { auto: false } }, '12 would pass 10');
  t.is((await balanceOf(c.dir)).balance, '92');
});

test('SPEC §10, §4.1: quotes waiting for payment are bounded like running calls (4 × per_caller_inflight per caller); past that the call is refused', async (t) => {
  const { p, c } = await market(t, [{ id: 'img.render', price: 30 }], { caller: { payments: { auto_max: 1 } } });
  const waiting = [];
  for (let i = 0; i < 4; i++) waiting.push(await call(c.dir, p.aid, 'img.render'));
  t.true(waiting.every((w) => w.state === 'input-required'));
  t.like(await call(c.dir, p.aid, 'img.render'), {
    state: 'rejected',
    reason: 'caller_inflight',
    detail: 'too many quotes wait for payment',
  });
  t.is((await runCli(['reject', waiting[0].task, '--data', c.dir])).code, 0);
  t.like(await call(c.dir, p.aid, 'img.render'), { state: 'input-required' }, 'a rejected quote makes room');
  t.is(p.ran(), 0);
});

test('SPEC §10: a capture the hub refuses for good (the hold expired while the call ran) gives no result: failed, settlement_failed, nothing charged', async (t) => {
  let finish!: () => void;
  const done = new Promise<void>((r) => (finish = r));
  const { net, p, c } = await market(t, [{ id: 'slow.job', price: 6 }], {
    handler: async (body) => {
      await done;
      return { done: body };
    },
    credits: '10',
  });
  const sent = call(c.dir, p.aid, 'slow.job');
  await until(async () => (await balanceOf(c.dir)).held === '6', 'the hold');
  net.clock.advance(24 * 3_600_000 + 1);
  finish();
  const r = await sent;
  t.like(r, { state: 'failed', reason: 'settlement_failed', result: null, payment: { status: 'payment-failed' } });
  t.regex(r.detail, /the hub refused the capture \(expired\); the result is not given without the payment/);
  t.like(await balanceOf(c.dir), { balance: '10', held: '0' });
});

test('SPEC §10, §9.5: a paid task whose provider never answers is given up once the hub has settled the payment: failed, outcome_unknown, and no longer sent at every start', async (t) => {
  const { net, p, c, provider, caller } = await market(t, [{ id: 'slow.job', price: 6 }], {
    handler: () => new Promise(() => {}),
    credits: '10',
  });
  const first = await caller.node.caller.call(p.aid, 'slow.job', '{}', [], 1000);
  await until(async () => (await balanceOf(c.dir)).held === '6', 'the hold');
  await until(async () => (await caller.node.caller.task(first.task))?.state === 'working', 'the paid call to run');
  // The provider goes away for good while the paid call runs: no answer will ever come.
  await provider.close();
  await caller.close();
  // A restart within the time the provider may still capture sends the payment again (it may get the answer).
  net.clock.advance(3_600_000);
  const before = net.envelopes();
  let again = await net.start(c.dir);
  await until(() => net.envelopes() > before, 'the payment sent again');
  t.is((await again.node.caller.task(first.task))!.state, 'working');
  t.true(await hasPaying(again), 'still waiting for the provider');
  await again.close();
  // Past its validBefore + 25 h, the hub has released (or captured) the hold: the caller stops waiting.
  net.clock.advance(25 * 3_600_000);
  const envelopes = net.envelopes();
  again = await net.start(c.dir);
  await until(async () => (await again.node.caller.task(first.task))?.state === 'failed', 'the task to end');
  const rec = (await again.node.caller.task(first.task))!;
  t.like(rec, { state: 'failed', reason: 'outcome_unknown' });
  t.regex(rec.detail ?? '', /never answered after the payment.*anet balance/);
  t.false(await hasPaying(again), 'the paying mark is gone');
  t.is(net.envelopes(), envelopes, 'nothing was sent to the provider');
  t.like(await balanceOf(c.dir), { balance: '10', held: '0' }, 'the hub gave the uncaptured hold back');
});

async function hasPaying(d: { node: { store: { paying: { keys(): AsyncIterable<string> } } } }): Promise<boolean> {
  for await (const _ of d.node.store.paying.keys()) return true;
  return false;
}
