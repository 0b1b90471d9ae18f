// A priced capability call (SPEC §10), from the provider's side: RECEIVED with the quota windows taken
// (exclusively), then QUOTED, and the caller gets `input-required` with the signed x402 quote; its
// arguments wait in the node's WaitingQuotes. `task.pay` → PAY (journaled before the hub is asked) →
// the hub holds the amount → HELD → the in-flight slot → the service → the outcome → settle.ts.
// `task.cancel` → CANCELED. Hub operations are idempotent by nonce, so a retry never charges twice.
import type { HubClient } from '../../hub-client/client.js';
import { dropBlobs } from './files.js';
import { randomHex } from '../../util/random.js';
import { crashPoint } from '../../util/crash.js';
import type { CborValue } from '../../identity/cbor.js';
import type { CallContext } from '../../../machines/call.js';
import { HubRefusedError } from '../../hub-client/client.js';
import { checkTarget } from '../../service/call.js';
import { paymentRequired, signQuote, QUOTE_SECONDS } from '../../protocol/quote.js';
import { peekAuthorization } from '../../protocol/authorization.js';
import { X402_STATUS, X402_REQUIRED, X402_PAYLOAD, QUOTE_SIGNATURE } from '../../protocol/messages.js';
import type { Call } from '../../actors/call.js';
import type { Cancelable } from './cancels.js';
import type { CallIn, Checked } from './checks.js';
import { takeInflight, takeQuota, type SlotParts } from './slots.js';
import type { Quoted, WaitingQuotes } from './quotes.js';
import {
  afterAdmission,
  ending,
  outcomeEvent,
  outcomeOf,
  payloadOf,
  receive,
  refuse,
  runningMark,
  type CallMetrics,
  type Running,
} from './record.js';
import { replyTo, answer, type Reply } from './reply.js';
import { previewsOf, serve, target, type ServiceParts } from './service.js';
import type { Cancels } from './cancels.js';
import { paidAnswer, paidReceipt, settleAndAnswer, storedResult, unheldAnswer, type SettleParts } from './settle.js';

/** What a paid call uses of the node, with the waiting quotes the node owns. */
export interface PaidCallParts extends SettleParts, ServiceParts, SlotParts {
  quotes: WaitingQuotes;
  /** The hub's ledger, and its blobs: a call's files are deleted there once it ended. */
  client: Pick<HubClient, 'hold' | 'settle' | 'deleteBlobs'>;
  /** The running calls a caller may cancel. */
  cancels: Cancels;
  metrics: CallMetrics;
}

/**
 * Journals RECEIVED beside the quota windows (taken in the capability's turn), then quotes the call —
 * or refuses it when the windows are full, or too many quotes wait already.
 */
export async function quoteCall(
  parts: PaidCallParts,
  record: Call,
  call: Running,
  callIn: CallIn,
  argsText: string,
  checked: Checked,
): Promise<'refused' | 'resend' | 'quoted'> {
  const [first, admission] = await Promise.all([
    receive(record, call, Buffer.from(argsText), runningMark(record, call)),
    takeQuota(parts, checked, callIn),
  ]);
  const next = await afterAdmission(parts, record, call, first, admission);
  if (typeof next === 'string') return next;
  const { admitted: decision, reply } = next;
  // Quotes hold their arguments in memory for up to 10 minutes without an in-flight slot: bounded too.
  const full = parts.quotes.roomFor(decision.capability, call.caller);
  if (full) {
    await decision.release(true);
    await refuse(parts, record, { reason: full, detail: 'too many quotes wait for payment' }, reply, call.capability);
    return 'refused';
  }
  await offerQuote(parts, {
    record,
    call,
    argsText,
    capability: decision.capability,
    files: decision.files,
    listed: decision.listed,
    undoQuota: () => decision.release(true),
  });
  return 'quoted';
}

/** Journals QUOTED and sends the caller `input-required` with the signed x402 PaymentRequired. */
async function offerQuote(parts: PaidCallParts, q: Quoted): Promise<void> {
  const reply = replyTo(parts, q.call.caller, q.call.task, q.listed);
  let network: string;
  try {
    network = `hub:${await parts.hubAid()}`;
  } catch (err) {
    await q.record.outcome({ type: 'FAILED', reason: 'settlement_failed', detail: 'the hub is unreachable' }, ending(q.record, null));
    parts.log(`call ${q.call.task}: cannot quote: ${(err as Error).message}`, 'error');
    return reply({ state: 'failed', reason: 'settlement_failed', detail: 'the provider cannot reach its hub; nothing was charged' });
  }
  const quoteId = randomHex(16);
  const amount = q.capability.service.price!.toString();
  const at = parts.now();
  const expiresAt = at + QUOTE_SECONDS * 1000;
  const required = paymentRequired({
    network,
    amount,
    payTo: parts.identity.aid,
    skillId: q.call.capability,
    taskId: q.call.task,
    quoteId,
  });
  await q.record.quoted({ quoteId, amount, expiresAt });
  // The machine ends the quote at its deadline; past it (and a second more) the arguments are let go,
  // and TICK ends the call in case the host's own timer has not run yet.
  parts.quotes.hold(q, expiresAt - at + 1000, () => {
    dropBlobs(parts.client, q.call.blobs, parts.log);
    void q.record.tick(ending(q.record, null)).catch(() => {});
  });
  await reply({
    state: 'input-required',
    reason: 'payment_required',
    [X402_STATUS]: 'payment-required',
    [X402_REQUIRED]: JSON.stringify(required),
    [QUOTE_SIGNATURE]: signQuote(parts.identity, required),
  });
}

/**
 * `task.pay`: the caller's authorization for a quoted call, checked against the quote; PAY is journaled
 * before the hub is asked (from there a crash leaves `paying`, which the next start releases). A payment
 * for a call that waits no more gets the final answer again, once the call has ended.
 */
export async function payCall(parts: PaidCallParts, record: Call, body: Record<string, CborValue>): Promise<void> {
  // Read before the quote is taken, so a hub that does not answer now cannot lose the quote.
  const network = `hub:${await parts.hubAid()}`;
  const q = parts.quotes.take(record.id);
  if (!q) return answerAgain(parts, record, body);
  // Cancelable from the moment the quote is taken: a task.cancel handled while PAY is journaled (or the
  // hub holds the amount) must find the call, or it is lost and the paid call runs on.
  const run = parts.cancels.open(record.id, parts.stopping);
  // Taken: whatever happens now, the call's files are read at most once, so its blobs go after it.
  const ended = () => {
    run.close();
    dropBlobs(parts.client, q.call.blobs, parts.log);
  };
  const reply = replyTo(parts, record.caller, record.task, q.listed);
  let paying: Awaited<ReturnType<typeof startPaying>>;
  try {
    paying = await startPaying(parts, record, body, network);
  } catch (err) {
    // Not journaled (the store failed): the call is let go as a stop would leave it, for the next start.
    ended();
    throw err;
  }
  if ('bytes' in paying) {
    void runPaid(parts, q, paying.bytes, reply, run)
      .finally(ended)
      .catch(
        (err) => parts.stopping.aborted || parts.log(`paid call ${record.task} (${q.call.capability}): ${(err as Error).message}`, 'error'),
      );
    return;
  }
  ended();
  if ('expired' in paying) {
    // The quote's own timer was cleared when it was taken: TICK ends the call at its passed deadline.
    await record.tick(ending(record, null));
    await parts.store.running.del(record.id);
    return reply({ state: 'failed', reason: 'quote_expired', [X402_STATUS]: 'payment-failed' });
  }
  const detail = paying.wrong;
  await record.outcome({ type: 'FAILED', reason: 'settlement_failed', detail }, ending(record, null));
  return reply({ state: 'failed', reason: 'settlement_failed', detail, [X402_STATUS]: 'payment-failed' });
}

/**
 * Checks a payment against its quote and journals PAY: the authorization's bytes, or the quote's deadline
 * passed, or what is wrong with the payment.
 */
async function startPaying(
  parts: PaidCallParts,
  record: Call,
  body: Record<string, CborValue>,
  network: string,
): Promise<{ bytes: Uint8Array } | { expired: true } | { wrong: string }> {
  const ctx = (await record.state())!.context;
  const auth = readPayment(parts, body, ctx, record.caller, network);
  if (typeof auth === 'string') return { wrong: auth };
  return (await record.pay({ payNonce: auth.nonce })) ? { bytes: auth.bytes } : { expired: true };
}

/** `task.cancel` of a quoted call: the caller declined the quote; CANCELED lets it go. False when no quote waits. */
export async function cancelQuote(parts: PaidCallParts, record: Call): Promise<boolean> {
  const q = parts.quotes.take(record.id);
  if (!q) return false;
  dropBlobs(parts.client, q.call.blobs, parts.log);
  await record.canceled({ reason: 'payment_rejected' }, ending(record, null));
  return true;
}

function authorizationIn(body: Record<string, CborValue>): Uint8Array | null {
  try {
    const payload = JSON.parse(String(body[X402_PAYLOAD]));
    return new Uint8Array(Buffer.from(String(payload.payload.authorization), 'base64'));
  } catch {
    return null;
  }
}

/** The authorization in a `task.pay`, checked against the quote it pays; a string says what is wrong. */
function readPayment(
  parts: PaidCallParts,
  body: Record<string, CborValue>,
  ctx: CallContext,
  from: string,
  network: string,
): { bytes: Uint8Array; nonce: string } | string {
  const bytes = authorizationIn(body);
  if (!bytes) return 'the payment carries no x402 payload with an authorization';
  const read = peekAuthorization(bytes);
  if (!read.ok) return `the authorization is invalid: ${read.why}`;
  const a = read.auth;
  if (a.from !== from || a.to !== parts.identity.aid || a.taskId !== ctx.task || a.quoteId !== ctx.quoteId)
    return 'the authorization is for another payer, payee, task or quote';
  if (a.amount !== ctx.amount || a.asset !== 'credit' || a.network !== network)
    return `the authorization is not for ${ctx.amount} credits on ${network}`;
  // The hub checks the payer's signature against its KEL when it holds the amount.
  return { bytes, nonce: a.nonce };
}

/** Hold (HELD), take the in-flight slot, run the service, journal its outcome; then settle and answer. */
async function runPaid(parts: PaidCallParts, q: Quoted, authorization: Uint8Array, reply: Reply, run: Cancelable): Promise<void> {
  const { record, call } = q;
  let holdTx: string;
  try {
    holdTx = (await parts.client.hold(authorization)).tx;
  } catch (err) {
    // Refused (no funds, expired) or no answer: whatever the hub may hold is released in settling.
    await record.outcome({ type: 'FAILED', reason: 'settlement_failed', detail: hubWords(err) });
    return settleAndAnswer(parts, record, null, q.listed);
  }
  crashPoint('after-hold');
  await record.held({ tx: holdTx });
  if (run.canceled()) return cancelPaid(parts, q);
  const slot = await takeInflight(parts, q.capability, {
    id: `${call.caller}/${call.task}`,
    from: call.caller,
    capability: call.capability,
    args: null,
  });
  if ('admitted' in slot) {
    parts.metrics.callRefused(call.capability, slot.reason);
    await q.undoQuota();
    await record.refused({ reason: slot.reason });
    return settleAndAnswer(parts, record, null, q.listed);
  }
  const measured = parts.metrics.callAdmitted(call.capability);
  let ended = 'stopped';
  try {
    const service = target(parts.config, q.capability);
    const preview = previewsOf(parts, call);
    const outcome = await serve(parts, call, q.argsText, q.files, service, checkTarget(service), reply, {
      run,
      ...(preview ? { preview } : {}),
    });
    // Stopping: the next start releases the hold and ends the call `interrupted`.
    if (parts.stopping.aborted) return;
    // Canceled by its caller: the hold is released, unless the result came first (then it stands).
    ended = run.canceled() && outcome.state !== 'completed' ? 'canceled' : outcomeOf(outcome);
    if (ended === 'canceled') return await cancelPaid(parts, q);
    const payload = q.capability.inbound.discard ? null : payloadOf(q.argsText, q.files, outcome);
    const kept = payload === null ? [] : [{ sublevel: 'payloads' as const, key: record.id, value: payload }];
    await record.outcome(outcomeEvent(parts, call, outcome), kept);
    await settleAndAnswer(parts, record, outcome.state === 'completed' ? outcome.text : null, q.listed);
  } finally {
    measured(ended);
    if (!parts.stopping.aborted) await slot.release();
  }
}

/** CANCELED of a paid call: it goes `settling`, the hold is released, and the caller gets `canceled` with the receipt of the release. */
async function cancelPaid(parts: PaidCallParts, q: Quoted): Promise<void> {
  await q.record.canceled({ reason: 'canceled' });
  await settleAndAnswer(parts, q.record, null, q.listed);
}

const hubWords = (err: unknown) => (err instanceof HubRefusedError ? `the hub refused: ${err.code}` : 'the hub did not answer');

/**
 * A payment that arrives for a call that has ended (the caller sent it again after a restart, or our
 * answer was lost on the way): the same payment gets the final answer again, rebuilt from the journal
 * and the kept result. Nothing runs or settles again. A payment for a call that ended before anything
 * was held (its quote declined by a task.cancel that crossed the payment, or expired) is answered with
 * that ending and `payment-failed`: the caller learns its task is over and that nothing was charged.
 */
async function answerAgain(parts: PaidCallParts, record: Call, body: Record<string, CborValue>): Promise<void> {
  const state = await record.state();
  const ctx = state?.context;
  const bytes = authorizationIn(body);
  const read = bytes ? peekAuthorization(bytes) : null;
  if (!ctx || !state.done || !read?.ok || read.auth.taskId !== ctx.task) return;
  if (ctx.settled === null && ctx.payNonce === null) {
    return answer(parts, ctx.caller, ctx.task, unheldAnswer(ctx));
  }
  if (ctx.settled === null || read.auth.nonce !== ctx.payNonce) return;
  const text = ctx.ending === 'completed' ? await storedResult(parts, record) : null;
  const receipt = paidReceipt(parts, ctx, { tx: ctx.settleTx ?? '', state: ctx.settled }, text);
  await answer(parts, ctx.caller, ctx.task, await paidAnswer(parts, ctx, text, receipt?.bytes));
}
