// SPEC §9.1 (task states), §9.4 (receipts), §10 (a quote and its payment): the caller's task records
// change only through next(record, event) (src/node/caller/records.ts), a pure table; here each of its
// rows, alone. The whole flows (sending, resends, payments) are test/calls, test/hostile/lost-tasks and
// test/payments.
import test from 'ava';
import {
  answerStep,
  awaitingOperator,
  newRecord,
  next,
  resendsOver,
  shownAt,
  ABANDONED_DETAIL,
  NOT_JSON_DETAIL,
  type Answer,
  type TaskRecord,
} from '../../src/node/caller/records.js';
import { readAnswer, retryAfterOf } from '../../src/node/caller/answers.js';
import type { PaymentRecord } from '../../src/node/caller/payment.js';
import { CHAT } from '../../src/protocol/messages.js';

const T = 1_700_000_000_000;
const sent = (capability = 'demo.echo') => newRecord('t1', 'provider', capability, T);
const answer = (a: Partial<Answer>): Answer => ({
  at: T + 10,
  state: null,
  reason: null,
  retryAfterMs: null,
  detail: null,
  message: null,
  ...a,
});
const quote = (p: Partial<PaymentRecord> = {}): PaymentRecord => ({
  status: 'payment-required',
  skillId: 'demo.echo',
  required: '{}',
  signature: 'sig',
  quote: null,
  quoteError: null,
  receivedAt: T,
  expiresAt: T + 600_000,
  decided: false,
  auto: null,
  why: null,
  price: null,
  nonce: null,
  authorizedAt: null,
  hubTx: null,
  receipts: null,
  ...p,
});
const quoted = (p: Partial<PaymentRecord> = {}): TaskRecord => ({
  ...sent(),
  state: 'input-required',
  payment: quote(p),
  reason: 'payment_required',
});

test('SPEC §9.1: a task starts submitted, with nothing but who, what and when', (t) => {
  const r = sent();
  t.like(r, {
    task: 't1',
    to: 'provider',
    capability: 'demo.echo',
    state: 'submitted',
    sentAt: T,
    updatedAt: T,
    payment: null,
    result: null,
    receipt: null,
  });
  t.false(resendsOver(r));
});

test('SPEC §9.1: a task that could not be sent ends failed, not_delivered, saying why', (t) => {
  const r = next(sent(), { type: 'not-delivered', at: T + 1, detail: 'the hub is down' });
  t.like(r, { state: 'failed', reason: 'not_delivered', detail: 'the hub is down', updatedAt: T + 1 });
  t.truthy(r.explanation);
  t.true(resendsOver(r));
});

test('SPEC §9.1: the provider’s words go on the record; a state it does not know leaves the record’s own', (t) => {
  const working = next(sent(), { type: 'answered', answer: answer({ state: 'working', message: 'on it' }), payment: null });
  t.like(working, { state: 'working', message: 'on it', updatedAt: T + 10, reason: null, explanation: null });
  const unknown = next(working, {
    type: 'answered',
    answer: answer({ state: null, reason: 'rate_limited', retryAfterMs: 500 }),
    payment: null,
  });
  t.like(unknown, { state: 'working', reason: 'rate_limited', retryAfterMs: 500, message: null });
  t.truthy(unknown.explanation);
});

test('SPEC §9.4: a completed call keeps its result and the receipt check’s verdict; a text task keeps no receipt', (t) => {
  const done = next(sent(), {
    type: 'answered',
    answer: answer({ state: 'completed' }),
    payment: null,
    completed: { json: true, result: { ok: 1 }, receipt: 'bafy' },
  });
  t.like(done, { state: 'completed', result: { ok: 1 }, receipt: 'bafy' });
  const text = next(sent(CHAT), {
    type: 'answered',
    answer: answer({ state: 'completed' }),
    payment: null,
    completed: { json: true, result: 'hola', receipt: 'ignored' },
  });
  t.like(text, { state: 'completed', result: 'hola', receipt: null });
});

test('SPEC §9.1: a result that is not JSON fails the task (service_error)', (t) => {
  const r = next(sent(), { type: 'answered', answer: answer({ state: 'completed' }), payment: null, completed: { json: false } });
  t.like(r, { state: 'failed', reason: 'service_error', detail: NOT_JSON_DETAIL, result: null });
});

test('SPEC §10: what an answer does: a first quote is checked, a second one, one on a text task and `working` under a quote are ignored', (t) => {
  t.is(answerStep(sent(), answer({ state: 'input-required' })), 'quote');
  t.is(answerStep(sent(CHAT), answer({ state: 'input-required' })), 'ignore');
  t.is(answerStep(quoted(), answer({ state: 'input-required' })), 'ignore');
  t.is(answerStep(quoted(), answer({ state: 'working' })), 'ignore');
  t.is(answerStep(quoted(), answer({ state: 'completed' })), 'take');
  t.is(answerStep(sent(), answer({ state: 'working' })), 'take');
});

test('SPEC §10: a quote makes the task input-required, payment_required, with the quote’s error as detail; resends stop', (t) => {
  const r = next(sent(), { type: 'quoted', answer: answer({ state: 'input-required' }), payment: quote({ quoteError: 'bad signature' }) });
  t.like(r, { state: 'input-required', reason: 'payment_required', detail: 'bad signature', payment: { status: 'payment-required' } });
  t.true(resendsOver(r));
  t.false(awaitingOperator(r));
});

test('SPEC §10: the auto-pay verdict: paid is working; refused waits for the operator, above the signed price said so', (t) => {
  const paid = next(quoted(), { type: 'decided', at: T + 20, payment: quote({ status: 'payment-submitted', decided: true, auto: true }) });
  t.like(paid, { state: 'working', reason: null, explanation: null, detail: null, updatedAt: T + 20 });
  const above = next(quoted(), {
    type: 'decided',
    at: T + 20,
    payment: quote({ decided: true, auto: false, why: 'the quote (9) is above the signed price (5)' }),
  });
  t.like(above, { state: 'input-required', reason: 'quote_above_price', detail: 'the quote (9) is above the signed price (5)' });
  t.true(awaitingOperator(above));
  const noCard = next(quoted(), { type: 'decided', at: T + 20, payment: quote({ decided: true, auto: false, why: 'no signed price' }) });
  t.is(noCard.reason, 'payment_required');
});

test('SPEC §10: anet pay makes the task working; anet reject ends it canceled, payment_rejected', (t) => {
  t.like(next(quoted(), { type: 'paid', at: T + 30, payment: quote({ status: 'payment-submitted', decided: true }) }), {
    state: 'working',
    reason: null,
    updatedAt: T + 30,
  });
  t.like(next(quoted(), { type: 'rejected', at: T + 30, payment: quote({ status: 'payment-rejected', decided: true }) }), {
    state: 'canceled',
    reason: 'payment_rejected',
    detail: null,
    payment: { status: 'payment-rejected' },
  });
});

test('SPEC §10: a final answer of a paid task keeps the payment as settled', (t) => {
  const settled = quote({ status: 'payment-completed', decided: true, hubTx: 'tx1' });
  const r = next(quoted(), {
    type: 'answered',
    answer: answer({ state: 'completed' }),
    payment: settled,
    completed: { json: true, result: 1, receipt: 'bafy' },
  });
  t.like(r, { state: 'completed', payment: { status: 'payment-completed', hubTx: 'tx1' }, receipt: 'bafy' });
});

test('SPEC §10: after a restart, a payment sent again moves a record left at its quote to working; any other record stays as it is', (t) => {
  const r = next(quoted(), { type: 'payment-resent', nonce: 'n1', auto: true });
  t.like(r, { state: 'working', updatedAt: T, payment: { status: 'payment-submitted', decided: true, auto: true, nonce: 'n1' } });
  const working = { ...quoted(), state: 'working' as const };
  t.is(next(working, { type: 'payment-resent', nonce: 'n1', auto: true }), working);
  const free = sent();
  t.is(next(free, { type: 'payment-resent', nonce: 'n1', auto: false }), free);
});

test('SPEC §10: an abandoned payment ends its task outcome_unknown, unless the task has ended', (t) => {
  t.like(next(quoted(), { type: 'abandoned', at: T + 40 }), {
    state: 'failed',
    reason: 'outcome_unknown',
    detail: ABANDONED_DETAIL,
    updatedAt: T + 40,
  });
  const done = { ...sent(), state: 'completed' as const };
  t.is(next(done, { type: 'abandoned', at: T + 40 }), done);
});

test('SPEC §9.1: a provider silent through the resends ends the task outcome_unknown, its wait cleared', (t) => {
  const r = next({ ...sent(), retryAfterMs: 100 }, { type: 'unanswered', at: T + 50, detail: 'silent' });
  t.like(r, { state: 'failed', reason: 'outcome_unknown', detail: 'silent', retryAfterMs: null, updatedAt: T + 50 });
});

test('SPEC §10: a quote nobody paid in time is shown failed, quote_expired; records from before payments show payment null', (t) => {
  t.like(shownAt(quoted(), T + 600_000), { state: 'failed', reason: 'quote_expired', detail: null });
  t.like(shownAt(quoted(), T + 599_999), { state: 'input-required' });
  const old = sent() as Partial<TaskRecord>;
  delete old.payment;
  t.is(shownAt(old as TaskRecord, T).payment, null);
});

test('SPEC §9.1: an answer’s body is read field by field; a peer’s retry_after_ms is a whole number within a day', (t) => {
  t.deepEqual(readAnswer({ state: 'working', reason: 7, detail: 'd', message: 'm', retry_after_ms: 1.2 }, T), {
    at: T,
    state: 'working',
    reason: null,
    retryAfterMs: 2,
    detail: 'd',
    message: 'm',
  });
  t.is(readAnswer({ state: 'submitted' }, T).state, null);
  t.is(retryAfterOf(-1), null);
  t.is(retryAfterOf(Number.POSITIVE_INFINITY), null);
  t.is(retryAfterOf(1e12), 24 * 3_600_000);
});
