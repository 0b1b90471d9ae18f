// SPEC §10, §14: the payment machines are pure — time comes in events — and their deadlines are states:
// a quote is payable until its end, the daily window is exact over any 24 h, a paid call settles
// before its final state, and an interrupted paid call releases its hold.
import test from 'ava';
import { step, initial } from '../../src/runtime/pure.js';
import { paymentMachine, UNANSWERED_MS, type PaymentContext } from '../../machines/payment.js';
import { spendMachine, type SpendContext } from '../../machines/spend.js';
import { callMachine, type CallContext } from '../../machines/call.js';
import type { AnyMachineSnapshot } from 'xstate';

const run = (machine: Parameters<typeof step>[0], input: unknown, events: { type: string; at: number; [k: string]: unknown }[]) =>
  events.reduce((s: AnyMachineSnapshot, e) => step(machine, s, e), initial(machine, input));

test('SPEC §10: a quote can be authorized until its deadline, not at it; TICK at the deadline expires it', (t) => {
  const quote = { type: 'QUOTE', at: 0, task: 't', provider: 'p', skillId: 's', quoteId: 'q', amount: '3', expiresAt: 600_000 };
  t.is(
    run(paymentMachine, undefined, [quote, { type: 'AUTHORIZE', at: 599_999, nonce: 'n', validBefore: 600_000, auto: true }]).value,
    'authorized',
  );
  t.is(
    run(paymentMachine, undefined, [quote, { type: 'AUTHORIZE', at: 600_000, nonce: 'n', validBefore: 600_000, auto: true }]).value,
    'expired',
  );
  const ticked = run(paymentMachine, undefined, [quote, { type: 'TICK', at: 599_999 }]);
  t.is(ticked.value, 'quoted');
  t.is((ticked.context as PaymentContext).deadline, 600_000, 'the deadline is in the context, for the host to arm');
  t.is(run(paymentMachine, undefined, [quote, { type: 'TICK', at: 600_000 }]).value, 'expired');
  const done = run(paymentMachine, undefined, [
    quote,
    { type: 'AUTHORIZE', at: 1, nonce: 'n', validBefore: 600_000, auto: true },
    { type: 'SETTLED', at: 2, captured: true, hubTx: 'tx_1' },
  ]);
  t.is(done.value, 'completed');
  t.is((done.context as PaymentContext).hubTx, 'tx_1');
});

test('SPEC §10: an authorized payment is given up only once the hub has settled it for sure (UNANSWERED_MS after its validBefore)', (t) => {
  const quote = { type: 'QUOTE', at: 0, task: 't', provider: 'p', skillId: 's', quoteId: 'q', amount: '3', expiresAt: 600_000 };
  const paid = [quote, { type: 'AUTHORIZE', at: 1, nonce: 'n', validBefore: 600_000, auto: true }];
  t.is(
    run(paymentMachine, undefined, [...paid, { type: 'ABANDON', at: 600_000 + UNANSWERED_MS - 1 }]).value,
    'authorized',
    'too early: the provider may still capture',
  );
  t.is(run(paymentMachine, undefined, [...paid, { type: 'ABANDON', at: 600_000 + UNANSWERED_MS }]).value, 'abandoned');
  t.true(UNANSWERED_MS > 24 * 3_600_000, 'longer than a hold lives on the hub');
  t.is(
    run(paymentMachine, undefined, [quote, { type: 'ABANDON', at: 600_000 + UNANSWERED_MS }]).value,
    'quoted',
    'nothing to give up before a payment',
  );
});

test('SPEC §2.3: daily_max is exact over any 24 h, in BigInt amounts up to 2^63−1; a refused spend records nothing', (t) => {
  const day = 24 * 3_600_000;
  const spend = (at: number, id: string, amount: string, limit = '10') => ({ type: 'SPEND', at, id, amount, limit });
  let s = run(spendMachine, { windowMs: day }, [spend(0, 'a', '6'), spend(1, 'b', '4')]);
  t.deepEqual((s.context as SpendContext).last, { id: 'b', accepted: true, spent: '10' });
  s = step(spendMachine, s, spend(day - 1, 'c', '1'));
  t.deepEqual((s.context as SpendContext).last, { id: 'c', accepted: false, spent: '10' });
  s = step(spendMachine, s, spend(day, 'd', '6'));
  t.deepEqual((s.context as SpendContext).last, { id: 'd', accepted: true, spent: '10' }, 'the 6 of t=0 left the window at exactly 24 h');
  s = step(spendMachine, s, { type: 'UNDO', at: day, id: 'd' } as never);
  t.deepEqual(
    (s.context as SpendContext).entries.map((e) => e.id),
    ['b'],
  );
  const max = '9223372036854775807';
  const big = run(spendMachine, { windowMs: day }, [spend(0, 'x', max, max), spend(1, 'y', '1', max)]);
  t.deepEqual((big.context as SpendContext).last, { id: 'y', accepted: false, spent: max });
});

test('SPEC §10, §9.5: a paid call waits in settling until the hub answered; capture for completed or outcome_unknown, release otherwise', (t) => {
  const received = { type: 'RECEIVED', at: 0, nonce: 'n', task: 't', caller: 'c', capability: 'x', argsBytes: 2, argsHash: 'h' };
  const quoted = [received, { type: 'QUOTED', at: 1, quoteId: 'q', amount: '3', expiresAt: 601 }, { type: 'PAY', at: 2, payNonce: 'p' }];
  const settle = (events: { type: string; at: number; [k: string]: unknown }[]) =>
    run(callMachine, undefined, [...quoted, { type: 'HELD', at: 3, tx: 'tx_h' }, ...events]);
  const completed = settle([{ type: 'COMPLETED', at: 4, resultBytes: 1, resultHash: 'r', receipt: '' }]);
  t.is(completed.value, 'settling');
  t.like(completed.context as CallContext, { settlement: 'capture', ending: 'completed' });
  t.is(
    step(callMachine, completed, { type: 'SETTLED', at: 5, tx: 'tx_c', settled: 'captured', receipt: 'bafy' } as never).value,
    'completed',
  );
  t.like(settle([{ type: 'FAILED', at: 4, reason: 'outcome_unknown' }]).context as CallContext, {
    settlement: 'capture',
    ending: 'failed',
  });
  t.like(settle([{ type: 'FAILED', at: 4, reason: 'service_error' }]).context as CallContext, { settlement: 'release', ending: 'failed' });
  t.like(settle([{ type: 'SERVICE_REJECTED', at: 4, message: 'no' }]).context as CallContext, {
    settlement: 'release',
    ending: 'rejected',
  });
  t.like(settle([{ type: 'INTERRUPTED', at: 4 }]).context as CallContext, {
    settlement: 'release',
    ending: 'failed',
    reason: 'interrupted',
  });
  const interruptedPaying = run(callMachine, undefined, [...quoted, { type: 'INTERRUPTED', at: 3 }]);
  t.like(
    interruptedPaying.context as CallContext,
    { settlement: 'release' },
    'a crash before the hold answered releases whatever the hub holds',
  );
  t.is(
    run(callMachine, undefined, [...quoted.slice(0, 2), { type: 'PAY', at: 601, payNonce: 'p' }]).value,
    'failed',
    "a payment at the quote's end is too late",
  );
  t.is(run(callMachine, undefined, [...quoted.slice(0, 2), { type: 'INTERRUPTED', at: 3 }]).value, 'failed', 'an unpaid quote just ends');
});
