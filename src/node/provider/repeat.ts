// The answer to a task id seen before (PROTOCOL §6.4, SPEC §9): nothing runs again and nothing is
// journaled. A caller sends a task again until it hears back, so an answer lost on the way is not lost
// for good: it is rebuilt from the call record and `payloads`.
import type { Identity } from '../../identity/store.js';
import type { ActorHost } from '../../runtime/host.js';
import { CHAT, X402_STATUS, X402_REQUIRED, QUOTE_SIGNATURE } from '../../protocol/messages.js';
import { paymentRequired, signQuote } from '../../protocol/quote.js';
import { signReceipt } from '../../protocol/receipt.js';
import type { CallContext } from '../../../machines/call.js';
import type { Call } from '../../actors/call.js';
import type { Kept } from './record.js';
import { replyTo, type Fields, type ReplyParts } from './reply.js';

/** What answering a repeat uses of the node. */
export interface RepeatParts extends ReplyParts {
  identity: Identity;
  host: ActorHost;
  hubAid: () => Promise<string>;
}

const FINAL_STATES = ['completed', 'failed', 'rejected'];

/**
 * A task still under way gets `working` (a priced one still waiting for payment its quote again); an
 * ended one its final answer: a completed call's result and receipt from `payloads`, a refusal or failure
 * from the call's context. A `discard` call's result is gone: `failed`, `interrupted`. A paid call's
 * final answer goes to its `task.pay` (§7.3), and a canceled one has none.
 */
export async function answerRepeat(parts: RepeatParts, record: Call): Promise<void> {
  const state = await record.state();
  if (!state) return;
  const { value, context: ctx } = state;
  const reply = replyTo(parts, record.caller, record.task);
  if (value === 'new') return;
  // A declined quote has no answer; a call its caller canceled while it ran says so again (unpaid ones: a
  // paid one's final answer goes to its `task.pay`).
  if (value === 'canceled') {
    if (ctx.reason === 'canceled' && ctx.payNonce === null) await reply({ state: 'canceled', reason: 'canceled' });
    return;
  }
  if (value === 'quoted') {
    if (ctx.quoteExpiresAt === null || parts.now() >= ctx.quoteExpiresAt) return;
    const network = `hub:${await parts.hubAid()}`;
    const required = paymentRequired({
      network,
      amount: ctx.amount!,
      payTo: parts.identity.aid,
      skillId: ctx.capability,
      taskId: record.task,
      quoteId: ctx.quoteId!,
    });
    return reply({
      state: 'input-required',
      reason: 'payment_required',
      [X402_STATUS]: 'payment-required',
      [X402_REQUIRED]: JSON.stringify(required),
      [QUOTE_SIGNATURE]: signQuote(parts.identity, required),
    });
  }
  if (!FINAL_STATES.includes(value)) return reply({ state: 'working' });
  if (ctx.payNonce !== null) return;
  await reply(await storedAnswer(parts, record, ctx, value));
}

/** An ended unpaid call's final answer, as it was sent (a wait to retry after counts from when it was given). */
async function storedAnswer(parts: RepeatParts, record: Call, ctx: CallContext, value: string): Promise<Fields> {
  const since = parts.now() - (ctx.endedAt ?? parts.now());
  const retry = ctx.retryAfterMs === null ? undefined : Math.max(0, ctx.retryAfterMs - since);
  if (value === 'rejected')
    return {
      state: 'rejected',
      reason: ctx.reason ?? undefined,
      message: ctx.message ?? undefined,
      detail: ctx.detail ?? undefined,
      retry_after_ms: retry,
    };
  if (value === 'failed')
    return { state: 'failed', reason: ctx.reason ?? undefined, detail: ctx.detail ?? undefined, retry_after_ms: retry };
  const kept = (await parts.store.payloads.get(record.id)) as Kept | undefined;
  if (typeof kept?.result !== 'string')
    return {
      state: 'failed',
      reason: 'interrupted',
      detail: 'the call completed, but its answer did not reach you and the provider does not keep its result (discard)',
    };
  if (ctx.capability === CHAT && ctx.receipt === null) return { state: 'completed', result: kept.result };
  // The receipt the call was answered with; signed again (same task and result hash) after a key rotation.
  const receipt =
    kept.receipt && kept.receiptKsn === parts.identity.kel.ksn
      ? new Uint8Array(kept.receipt)
      : signReceipt(parts.identity, {
          task: ctx.task,
          capability: ctx.capability,
          caller: ctx.caller,
          result_hash: Buffer.from(ctx.resultHash!, 'hex'),
          at: parts.now(),
        }).bytes;
  return { state: 'completed', result: kept.result, receipt };
}
