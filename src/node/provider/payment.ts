// The provider's side of payments (SPEC §10). A priced call is admitted (quota windows taken) and then
// quoted: QUOTED is journaled and the caller gets `input-required` with the signed x402 quote. Its
// arguments wait in memory until the payment arrives (a quote stands 10 minutes; a restart ends it
// `interrupted`, nothing charged). `task.pay` → PAY (journaled before the hub is asked) → the hub holds
// the amount → HELD → the in-flight slot → the service → the outcome → settling: capture for
// `completed` and `outcome_unknown`, release otherwise → SETTLED → the final answer with
// `payment-completed` (or `payment-failed`) and a receipt naming the amount and the hub transaction.
// Hub operations are idempotent by nonce, and the settle nonce is derived from the hold, so a retry —
// after a timeout or a crash at any step — can never charge twice.
import { randomHex } from '../../util/random.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { sha256 } from '@noble/hashes/sha2.js';
import type { CallContext } from '../../../machines/call.js';
import type { ActorHost } from '../../runtime/host.js';
import type { MessageHandler } from '../../relay/messenger.js';
import type { OfferedCapability } from '../../config/check.js';
import type { FileOut } from './admission.js';
import { takeInflight } from './admission.js';
import { HubRefusedError } from '../../hub-client/client.js';
import { checkTarget } from '../../service/call.js';
import { signReceipt } from '../../protocol/receipt.js';
import { paymentRequired, signQuote, QUOTE_SECONDS } from '../../protocol/quote.js';
import { peekAuthorization } from '../../protocol/authorization.js';
import { crashPoint } from '../../util/crash.js';
import { answer, callActor, outcomeEvent, payloadOf, serve, target, type CallParts, type Reply, type Running } from './calls.js';
import { taskMessage } from '../../protocol/messages.js';
import type { CborValue } from '../../identity/cbor.js';
import { X402_STATUS, X402_REQUIRED, X402_PAYLOAD, X402_RECEIPTS, QUOTE_SIGNATURE } from '../../protocol/messages.js';


interface Quoted {
  actor: string;
  call: Running;
  argsText: string;
  capability: OfferedCapability;
  files: FileOut[];
  listed: boolean;
  /** Gives back the quota windows the quote took (a paid call refused later consumes no quota). */
  undoQuota: () => Promise<void>;
  timer?: NodeJS.Timeout;
}

/** Quotes waiting for payment, per capability and per caller, at most this many times its in-flight limits. */
const WAITING_PER_INFLIGHT = 4;

/** Quoted calls waiting for their payment, per host: their arguments live only here. */
const quotedCalls = new WeakMap<ActorHost, Map<string, Quoted>>();

function quotedOf(host: ActorHost): Map<string, Quoted> {
  let map = quotedCalls.get(host);
  if (!map) quotedCalls.set(host, (map = new Map()));
  return map;
}

/** Takes a quoted call out of the waiting set (once: a second payment of the same task finds nothing). */
function take(parts: CallParts, actor: string): Quoted | undefined {
  const map = quotedOf(parts.host);
  const q = map.get(actor);
  map.delete(actor);
  clearTimeout(q?.timer);
  return q;
}

const unmark = (actor: string) => [{ sublevel: 'running' as const, key: actor }];

/**
 * Quotes hold their arguments in memory for up to 10 minutes without an in-flight slot, so their number
 * is bounded like running calls are: `max_inflight` and `per_caller_inflight`, times four. Past that the
 * call is refused as a full capability would be.
 */
export function roomToQuote(parts: CallParts, cap: OfferedCapability, caller: string): 'max_inflight' | 'caller_inflight' | null {
  let all = 0;
  let mine = 0;
  for (const q of quotedOf(parts.host).values()) {
    if (q.capability.id !== cap.id) continue;
    all++;
    if (q.call.caller === caller) mine++;
  }
  if (all >= cap.inbound.max_inflight * WAITING_PER_INFLIGHT) return 'max_inflight';
  if (mine >= cap.inbound.per_caller_inflight * WAITING_PER_INFLIGHT) return 'caller_inflight';
  return null;
}

/** Journals the quote and sends the caller `input-required` with the signed x402 PaymentRequired. */
export async function offerQuote(parts: CallParts, q: Quoted): Promise<void> {
  const reply: Reply = (f) => answer(parts, q.call.caller, q.call.task, f, q.listed);
  let network: string;
  try {
    network = `hub:${await parts.hubAid()}`;
  } catch (err) {
    await parts.host.send(q.actor, 'call', undefined, { type: 'FAILED', reason: 'settlement_failed', detail: 'the hub is unreachable' }, { alongside: unmark(q.actor) });
    parts.log(`call ${q.call.task}: cannot quote: ${(err as Error).message}`);
    return reply({ state: 'failed', reason: 'settlement_failed', detail: 'the provider cannot reach its hub; nothing was charged' });
  }
  const quoteId = randomHex(16);
  const amount = q.capability.service.price!.toString();
  const at = parts.now();
  const expiresAt = at + QUOTE_SECONDS * 1000;
  const required = paymentRequired({ network, amount, payTo: parts.identity.aid, skillId: q.call.capability, taskId: q.call.task, quoteId });
  await parts.host.send(q.actor, 'call', undefined, { type: 'QUOTED', quoteId, amount, expiresAt });
  // The machine ends the quote at its deadline; this only lets go of the arguments held for it.
  const timer = setTimeout(() => void forgetExpired(parts, q.actor), expiresAt - at + 1000);
  timer.unref();
  quotedOf(parts.host).set(q.actor, { ...q, timer });
  await reply({ state: 'input-required', reason: 'payment_required', [X402_STATUS]: 'payment-required', [X402_REQUIRED]: JSON.stringify(required), [QUOTE_SIGNATURE]: signQuote(parts.identity, required) });
}

/** Past the quote's end: lets go of its arguments and ends it (the host's own TICK may not have run yet). */
async function forgetExpired(parts: CallParts, actor: string): Promise<void> {
  if (!take(parts, actor)) return;
  await parts.host.send(actor, 'call', undefined, { type: 'TICK' }, { alongside: unmark(actor) }).catch(() => {});
}

/** `task.pay`: the caller's authorization for a quoted call. */
export function payDesk(parts: CallParts): MessageHandler {
  return async (m) => {
    const msg = taskMessage(m);
    if (!msg) return;
    const { body, task } = msg;
    const actor = callActor(m.from, task);
    // Read before the quote is taken, so a hub that does not answer now cannot lose the quote.
    const network = `hub:${await parts.hubAid()}`;
    const q = take(parts, actor);
    // Not waiting: a payment sent again (the caller restarted, or our answer was lost) gets the answer
    // again once the call has ended; anything else changes nothing.
    if (!q) return answerAgain(parts, actor, body);
    const reply: Reply = (f) => answer(parts, m.from, task, f, q.listed);
    const ctx = (await parts.host.state(actor))!.context as CallContext;
    const auth = readPayment(parts, body, ctx, m.from, network);
    if (typeof auth === 'string') {
      await parts.host.send(actor, 'call', undefined, { type: 'FAILED', reason: 'settlement_failed', detail: auth }, { alongside: unmark(actor) });
      return reply({ state: 'failed', reason: 'settlement_failed', detail: auth, [X402_STATUS]: 'payment-failed' });
    }
    // Journaled before the hub is asked: from here a crash leaves `paying`, which the next start releases.
    const snap = await parts.host.send(actor, 'call', undefined, { type: 'PAY', payNonce: auth.nonce });
    if (snap.value !== 'paying') {
      await parts.store.running.del(actor);
      return reply({ state: 'failed', reason: 'quote_expired', [X402_STATUS]: 'payment-failed' });
    }
    void runPaid(parts, q, auth.bytes, reply).catch((err) => parts.stopping.aborted || parts.log(`paid call ${task} (${q.call.capability}): ${(err as Error).message}`));
  };
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
function readPayment(parts: CallParts, body: Record<string, CborValue>, ctx: CallContext, from: string, network: string): { bytes: Uint8Array; nonce: string } | string {
  const bytes = authorizationIn(body);
  if (!bytes) return 'the payment carries no x402 payload with an authorization';
  const read = peekAuthorization(bytes);
  if (!read.ok) return `the authorization is invalid: ${read.why}`;
  const a = read.auth;
  if (a.from !== from || a.to !== parts.identity.aid || a.taskId !== ctx.task || a.quoteId !== ctx.quoteId) return 'the authorization is for another payer, payee, task or quote';
  if (a.amount !== ctx.amount || a.asset !== 'credit' || a.network !== network) return `the authorization is not for ${ctx.amount} credits on ${network}`;
  // The hub checks the payer's signature against its KEL when it holds the amount.
  return { bytes, nonce: a.nonce };
}

/** Hold, run, then settle and answer. */
async function runPaid(parts: CallParts, q: Quoted, authorization: Uint8Array, reply: Reply): Promise<void> {
  const { actor, call } = q;
  let holdTx: string;
  try {
    holdTx = (await parts.client.hold(authorization)).tx;
  } catch (err) {
    // Refused (no funds, expired) or no answer: whatever the hub may hold is released in settling.
    await parts.host.send(actor, 'call', undefined, { type: 'FAILED', reason: 'settlement_failed', detail: hubWords(err) });
    return settleAndAnswer(parts, actor, null, q.listed);
  }
  crashPoint('after-hold');
  await parts.host.send(actor, 'call', undefined, { type: 'HELD', tx: holdTx });
  const slot = await takeInflight(parts, q.capability, { id: `${call.caller}/${call.task}`, from: call.caller, capability: call.capability, args: null });
  if ('admitted' in slot) {
    await q.undoQuota();
    await parts.host.send(actor, 'call', undefined, { type: 'REFUSED', reason: slot.reason });
    return settleAndAnswer(parts, actor, null, q.listed);
  }
  try {
    const service = target(parts.config, q.capability);
    const outcome = await serve(parts, call, q.argsText, q.files, service, checkTarget(service), reply);
    // Stopping: the next start releases the hold and ends the call `interrupted`.
    if (parts.stopping.aborted) return;
    const payload = q.capability.inbound.discard ? null : payloadOf(q.argsText, q.files, outcome);
    const kept = payload === null ? [] : [{ sublevel: 'payloads' as const, key: actor, value: payload }];
    await parts.host.send(actor, 'call', undefined, outcomeEvent(parts, call, outcome), { alongside: kept });
    await settleAndAnswer(parts, actor, outcome.state === 'completed' ? outcome.text : null, q.listed);
  } finally {
    if (!parts.stopping.aborted) await slot.release();
  }
}

const hubWords = (err: unknown) => (err instanceof HubRefusedError ? `the hub refused: ${err.code}` : 'the hub did not answer');

/** The hub's key for a hold's settlement: one per hold, so capture and release can never both happen. */
export const settleNonce = (holdNonce: string) => Buffer.from(sha256(Buffer.from(`anet-settle/v1\n${holdNonce}`))).toString('hex').slice(0, 32);

/**
 * Settles a call in `settling` with the hub (retrying until it answers), journals SETTLED with the
 * running mark, and sends the caller the final answer. `resultText` is the result in memory; after a
 * restart it is read from the payloads (a `discard` call's result is gone: the caller is told).
 */
export async function settleAndAnswer(parts: CallParts, actor: string, resultText: string | null, listed?: boolean): Promise<void> {
  const state = await parts.host.state(actor);
  if (state?.value !== 'settling') return;
  const ctx = state.context as CallContext;
  const settled = await settle(parts, ctx);
  if (!settled) return;
  crashPoint('after-capture');
  const text = resultText ?? (ctx.ending === 'completed' ? await storedResult(parts, actor) : null);
  const receipt = paidReceipt(parts, ctx, settled, text);
  await parts.host.send(actor, 'call', undefined, { type: 'SETTLED', tx: settled.tx, settled: settled.state, ...(receipt ? { receipt: receipt.cid } : {}) }, { alongside: unmark(actor) });
  await answer(parts, ctx.caller, ctx.task, await paidAnswer(parts, { ...ctx, settleTx: settled.tx, settled: settled.state }, text, receipt?.bytes), listed);
}

/** A completed call's receipt, naming the amount and hub transaction when the hold was captured. */
function paidReceipt(parts: CallParts, ctx: CallContext, settled: { tx: string; state: string }, text: string | null) {
  if (ctx.ending !== 'completed' || text === null || (ctx.settlement === 'capture' && settled.state !== 'captured')) return null;
  const captured = settled.state === 'captured';
  return signReceipt(parts.identity, { task: ctx.task, capability: ctx.capability, caller: ctx.caller, result_hash: Buffer.from(ctx.resultHash!, 'hex'), ...(captured ? { amount: ctx.amount!, hub_tx: settled.tx } : {}), at: parts.now() });
}

/** The final answer of a settled paid call: the outcome, and what the hub did with the payment. */
async function paidAnswer(parts: CallParts, ctx: CallContext, text: string | null, receipt: Uint8Array | undefined): Promise<Record<string, CborValue | undefined>> {
  const captured = ctx.settled === 'captured';
  const network = `hub:${await parts.hubAid().catch(() => '')}`;
  const x402Receipt = { success: captured, transaction: ctx.settleTx, network, payer: ctx.caller, ...(captured ? {} : { errorReason: ctx.settled }) };
  // A capture the hub refused for good: the call is not paid, so its result is not given.
  const unpaid = ctx.settlement === 'capture' && !captured;
  const fields = unpaid ? { state: 'failed', reason: 'settlement_failed', detail: `the hub refused the capture (${ctx.settled}); the result is not given without the payment` } : finalFields(ctx, text, receipt);
  return { ...fields, [X402_STATUS]: captured ? 'payment-completed' : 'payment-failed', [X402_RECEIPTS]: JSON.stringify([x402Receipt]) };
}

/**
 * A payment that arrives for a call that has ended (the caller sent it again after a restart, or our
 * answer was lost on the way): the same payment gets the final answer again, rebuilt from the journal
 * and the kept result. Nothing runs or settles again.
 */
async function answerAgain(parts: CallParts, actor: string, body: Record<string, CborValue>): Promise<void> {
  const state = await parts.host.state(actor);
  const ctx = state?.context as CallContext | undefined;
  const bytes = authorizationIn(body);
  const read = bytes ? peekAuthorization(bytes) : null;
  if (!ctx || !state?.status || state.status !== 'done' || ctx.settled === null || !read?.ok || read.auth.nonce !== ctx.payNonce) return;
  const text = ctx.ending === 'completed' ? await storedResult(parts, actor) : null;
  const receipt = paidReceipt(parts, ctx, { tx: ctx.settleTx ?? '', state: ctx.settled }, text);
  await answer(parts, ctx.caller, ctx.task, await paidAnswer(parts, ctx, text, receipt?.bytes));
}

/** The final answer a paid call's context calls for. */
function finalFields(ctx: CallContext, text: string | null, receipt: Uint8Array | undefined): Record<string, CborValue | undefined> {
  if (ctx.ending === 'completed' && text !== null) return { state: 'completed', result: text, receipt };
  if (ctx.ending === 'completed') return { state: 'failed', reason: 'interrupted', detail: 'the call completed, but the provider stopped before sending its result, which it does not keep (discard)' };
  const retry = ctx.retryAfterMs ?? undefined;
  if (ctx.ending === 'rejected') return { state: 'rejected', reason: ctx.reason ?? undefined, message: ctx.message ?? undefined, retry_after_ms: retry };
  return { state: 'failed', reason: ctx.reason ?? undefined, detail: ctx.detail ?? undefined, retry_after_ms: retry };
}

async function storedResult(parts: CallParts, actor: string): Promise<string | null> {
  const p = (await parts.store.payloads.get(actor)) as { result?: string | null } | undefined;
  return typeof p?.result === 'string' ? p.result : null;
}

/** The hub's answer to the settlement, asked again until it answers; null when the node stops first. */
async function settle(parts: CallParts, ctx: CallContext): Promise<{ tx: string; state: string } | null> {
  for (let delay = 1000; ; delay = Math.min(delay * 2, 60_000)) {
    try {
      const a = await parts.client.settle(ctx.payNonce!, ctx.settlement!, settleNonce(ctx.payNonce!));
      return { tx: a.tx, state: a.state };
    } catch (err) {
      // Past the hold's lifetime the hub gave the amount back to the payer.
      if (err instanceof HubRefusedError && err.code === 'HOLD_EXPIRED') return { tx: '', state: 'expired' };
      // The ledger's word is final; a hub that is down, overloaded, or out of step with our clock is not.
      if (err instanceof HubRefusedError && err.status < 500 && err.status !== 401 && err.status !== 429) {
        parts.log(`settling call ${ctx.task}: ${err.message}`);
        return { tx: '', state: err.code.toLowerCase() };
      }
      parts.log(`settling call ${ctx.task}: ${(err as Error).message}; retrying in ${delay / 1000} s`);
      const stopped = await sleep(delay, false, { signal: parts.stopping }).catch(() => true);
      if (stopped) return null;
    }
  }
}

/** `task.cancel` with `payment-rejected`: the caller declined the quote. */
export function cancelDesk(parts: CallParts): MessageHandler {
  return async (m) => {
    const msg = taskMessage(m);
    if (!msg) return;
    const actor = callActor(m.from, msg.task);
    if (!take(parts, actor)) return;
    await parts.host.send(actor, 'call', undefined, { type: 'CANCELED', reason: 'payment_rejected' }, { alongside: unmark(actor) });
  };
}

/** After a restart, once the relay is open: the calls left owing a settlement are settled and answered. */
export async function resumeSettlements(parts: CallParts, actors: string[]): Promise<void> {
  for (const actor of actors) await settleAndAnswer(parts, actor, null).catch((err) => parts.log(`settling ${actor}: ${(err as Error).message}`));
}
