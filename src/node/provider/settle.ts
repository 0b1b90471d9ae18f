// The end of a paid call (SPEC §10): once its outcome is journaled the call waits in `settling` until
// the hub has captured the hold (`completed`, `outcome_unknown`) or released it (anything else); then
// SETTLED is journaled with the running mark and the caller gets the final answer with
// `payment-completed` (or `payment-failed`) and a receipt naming the amount and the hub transaction.
// The settle nonce is derived from the hold, so a retry — after a timeout or a crash — never charges twice.
import type { Log } from '../../util/log.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { sha256 } from '@noble/hashes/sha2.js';
import type { CallContext } from '../../../machines/call.js';
import type { Identity } from '../../identity/store.js';
import type { ActorHost } from '../../runtime/host.js';
import { HubRefusedError, type HubClient } from '../../hub-client/client.js';
import { signReceipt } from '../../protocol/receipt.js';
import { X402_STATUS, X402_RECEIPTS } from '../../protocol/messages.js';
import { crashPoint } from '../../util/crash.js';
import { call, type Call } from '../../actors/call.js';
import { ending, type Kept, type Running } from './record.js';
import { answer, type Fields, type ReplyParts } from './reply.js';

/** What settling uses of the node. */
export interface SettleParts extends ReplyParts {
  identity: Identity;
  host: ActorHost;
  /** The hub's ledger: holds, captures and releases (SPEC §10). */
  client: Pick<HubClient, 'hold' | 'settle'>;
  hubAid: () => Promise<string>;
  log: Log;
  stopping: AbortSignal;
}

/** The hub's key for a hold's settlement: one per hold, so capture and release can never both happen. */
export const settleNonce = (holdNonce: string) =>
  Buffer.from(sha256(Buffer.from(`anet-settle/v1\n${holdNonce}`)))
    .toString('hex')
    .slice(0, 32);

/**
 * Settles a call in `settling` with the hub (retrying until it answers), journals SETTLED with the
 * running mark, and sends the caller the final answer. `resultText` is the result in memory; after a
 * restart it is read from the payloads (a `discard` call's result is gone: the caller is told).
 */
export async function settleAndAnswer(parts: SettleParts, record: Call, resultText: string | null, listed?: boolean): Promise<void> {
  const state = await record.state();
  if (state?.value !== 'settling') return;
  const ctx = state.context;
  const settled = await settle(parts, ctx);
  if (!settled) return;
  crashPoint('after-capture');
  const text = resultText ?? (ctx.ending === 'completed' ? await storedResult(parts, record) : null);
  const receipt = paidReceipt(parts, ctx, settled, text);
  await record.settled({ tx: settled.tx, settled: settled.state, ...(receipt ? { receipt: receipt.cid } : {}) }, ending(record, null));
  await answer(
    parts,
    ctx.caller,
    ctx.task,
    await paidAnswer(parts, { ...ctx, settleTx: settled.tx, settled: settled.state }, text, receipt?.bytes),
    listed,
  );
}

/** After a restart, once the relay is open: the calls left owing a settlement are settled and answered. */
export async function resumeSettlements(parts: SettleParts, calls: Running[]): Promise<void> {
  for (const c of calls) {
    const record = call(parts.host, c.caller, c.task);
    await settleAndAnswer(parts, record, null).catch((err) => parts.log(`settling ${record.id}: ${(err as Error).message}`, 'error'));
  }
}

/** A completed call's receipt, naming the amount and hub transaction when the hold was captured. */
export function paidReceipt(
  parts: { identity: Identity; now: () => number },
  ctx: CallContext,
  settled: { tx: string; state: string },
  text: string | null,
) {
  if (ctx.ending !== 'completed' || text === null || (ctx.settlement === 'capture' && settled.state !== 'captured')) return null;
  const captured = settled.state === 'captured';
  return signReceipt(parts.identity, {
    task: ctx.task,
    capability: ctx.capability,
    caller: ctx.caller,
    result_hash: Buffer.from(ctx.resultHash!, 'hex'),
    ...(captured ? { amount: ctx.amount!, hub_tx: settled.tx } : {}),
    at: parts.now(),
  });
}

/** The final answer of a settled paid call: the outcome, and what the hub did with the payment. */
export async function paidAnswer(
  parts: { hubAid: () => Promise<string> },
  ctx: CallContext,
  text: string | null,
  receipt: Uint8Array | undefined,
): Promise<Fields> {
  const captured = ctx.settled === 'captured';
  const network = `hub:${await parts.hubAid().catch(() => '')}`;
  const x402Receipt = {
    success: captured,
    transaction: ctx.settleTx,
    network,
    payer: ctx.caller,
    ...(captured ? {} : { errorReason: ctx.settled }),
  };
  // A capture the hub refused for good: the call is not paid, so its result is not given.
  const unpaid = ctx.settlement === 'capture' && !captured;
  const fields = unpaid
    ? {
        state: 'failed',
        reason: 'settlement_failed',
        detail: `the hub refused the capture (${ctx.settled}); the result is not given without the payment`,
      }
    : finalFields(ctx, text, receipt);
  return { ...fields, [X402_STATUS]: captured ? 'payment-completed' : 'payment-failed', [X402_RECEIPTS]: JSON.stringify([x402Receipt]) };
}

/** The answer to a payment for a call that ended before anything was held: its ending, nothing charged. */
export function unheldAnswer(ctx: CallContext): Fields {
  return { ...finalFields(ctx, null, undefined), [X402_STATUS]: 'payment-failed' };
}

/** The final answer a paid call's context calls for. */
function finalFields(ctx: CallContext, text: string | null, receipt: Uint8Array | undefined): Fields {
  if (ctx.ending === 'completed' && text !== null) return { state: 'completed', result: text, receipt };
  if (ctx.ending === 'completed')
    return {
      state: 'failed',
      reason: 'interrupted',
      detail: 'the call completed, but the provider stopped before sending its result, which it does not keep (discard)',
    };
  const retry = ctx.retryAfterMs ?? undefined;
  if (ctx.ending === 'canceled') return { state: 'canceled', reason: ctx.reason ?? 'canceled' };
  if (ctx.ending === 'rejected')
    return { state: 'rejected', reason: ctx.reason ?? undefined, message: ctx.message ?? undefined, retry_after_ms: retry };
  return { state: 'failed', reason: ctx.reason ?? undefined, detail: ctx.detail ?? undefined, retry_after_ms: retry };
}

/** A kept call's result, from `payloads` (null for a `discard` call, whose result is gone). */
export async function storedResult(parts: Pick<ReplyParts, 'store'>, record: Call): Promise<string | null> {
  const p = (await parts.store.payloads.get(record.id)) as Kept | undefined;
  return typeof p?.result === 'string' ? p.result : null;
}

/** The hub's answer to the settlement, asked again until it answers; null when the node stops first. */
async function settle(parts: SettleParts, ctx: CallContext): Promise<{ tx: string; state: string } | null> {
  for (let delay = 1000; ; delay = Math.min(delay * 2, 60_000)) {
    try {
      const a = await parts.client.settle(ctx.payNonce!, ctx.settlement!, settleNonce(ctx.payNonce!));
      return { tx: a.tx, state: a.state };
    } catch (err) {
      // Past the hold's lifetime the hub gave the amount back to the payer.
      if (err instanceof HubRefusedError && err.code === 'HOLD_EXPIRED') return { tx: '', state: 'expired' };
      // The ledger's word is final; a hub that is down, overloaded, or out of step with our clock is not.
      if (err instanceof HubRefusedError && err.status < 500 && err.status !== 401 && err.status !== 429) {
        parts.log(`settling call ${ctx.task}: ${err.message}`, 'error');
        return { tx: '', state: err.code.toLowerCase() };
      }
      parts.log(`settling call ${ctx.task}: ${(err as Error).message}; retrying in ${delay / 1000} s`, 'warn');
      const stopped = await sleep(delay, false, { signal: parts.stopping }).catch(() => true);
      if (stopped) return null;
    }
  }
}
