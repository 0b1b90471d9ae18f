// A free capability call (SPEC §4, §9.1, §3): RECEIVED goes to the journal in one batch with the quota
// windows' ADMIT and the in-flight START; a refusal is REFUSED and `rejected`; an admitted call runs the
// service, then its outcome (COMPLETED with a receipt, FAILED or SERVICE_REJECTED) is journaled with the
// in-flight FINISH and the caller gets `task.result`.
import { checkTarget, type ServiceOutcome } from '../../service/call.js';
import { signReceipt, resultHash } from '../../protocol/receipt.js';
import { crashPoint } from '../../util/crash.js';
import type { Identity } from '../../identity/store.js';
import type { HubClient } from '../../hub-client/client.js';
import type { Call } from '../../actors/call.js';
import type { CallIn, Checked } from './checks.js';
import { admitTogether, type SlotParts } from './slots.js';
import {
  afterAdmission,
  ending,
  outcomeEvent,
  outcomeOf,
  payloadOf,
  receive,
  runningMark,
  type CallMetrics,
  type Running,
} from './record.js';
import type { Fields, Reply, ReplyParts } from './reply.js';
import { previewsOf, serve, target, type ServiceParts } from './service.js';
import type { Cancels } from './cancels.js';
import type { Log } from '../../util/log.js';

/** What a free call uses of the node. */
export interface FreeCallParts extends ReplyParts, ServiceParts, SlotParts {
  identity: Identity;
  /** The hub: a call's file blobs are deleted there once it ended. */
  client: Pick<HubClient, 'deleteBlobs'>;
  log: Log;
  /** The running calls a caller may cancel. */
  cancels: Cancels;
  metrics: CallMetrics;
}

/**
 * Admits and starts a free call; returns the running call (boxed: an awaited promise would be joined),
 * or why it does not run: refused, or a resend of a task whose RECEIVED was already journaled.
 */
export async function freeCall(
  parts: FreeCallParts,
  record: Call,
  call: Running,
  callIn: CallIn,
  argsText: string,
  checked: Checked,
): Promise<{ done: Promise<void> } | 'refused' | 'resend'> {
  // The socket check (SPEC §3.2) runs while the call is journaled and admitted; the service waits for it.
  const service = target(parts.config, checked.capability);
  const socketCheck = checkTarget(service);
  // Marked running in the same batch as RECEIVED: a crash from here on ends it `interrupted` at the next
  // start, with its slots freed. The mark goes in the batch of the event that ends the call.
  const [first, admission] = await admitTogether(parts, checked, callIn, () =>
    receive(record, call, Buffer.from(argsText), runningMark(record, call)),
  );
  const next = await afterAdmission(parts, record, call, first, admission);
  if (typeof next === 'string') return next;
  const { admitted: decision, reply } = next;
  // No STARTED event: an admitted call goes from `submitted` to its end, and the running mark ends it
  // `interrupted` if the node stops first.
  const run = parts.cancels.open(record.id, parts.stopping);
  const measured = parts.metrics.callAdmitted(call.capability);
  let ended = 'stopped';
  const done = (async () => {
    try {
      const preview = previewsOf(parts, call);
      const outcome = await serve(parts, call, argsText, decision.files, service, socketCheck, reply, {
        run,
        ...(preview ? { preview } : {}),
      });
      // Stopping: nothing is answered or released now; the next start ends the call `interrupted`.
      if (parts.stopping.aborted) return;
      // Canceled by its caller: ended `canceled`, unless the result came first (then it stands).
      ended = run.canceled() && outcome.state !== 'completed' ? 'canceled' : outcomeOf(outcome);
      if (ended === 'canceled') return await endCanceled(record, reply, () => decision.release());
      // `discard` (SPEC §9.3): arguments, files and result lived only in memory and go with this scope.
      const payload = decision.capability.inbound.discard ? null : payloadOf(argsText, decision.files, outcome);
      await finish(parts, record, call, outcome, reply, payload, () => decision.release());
    } catch (err) {
      if (!parts.stopping.aborted) await decision.release();
      throw err;
    } finally {
      run.close();
      measured(ended);
    }
  })();
  return { done };
}

/** CANCELED (the running mark goes in its batch) with the slot given back, then `canceled` to the caller. */
export async function endCanceled(record: Call, reply: Reply, release: () => Promise<void>): Promise<void> {
  const ended = record.canceled({ reason: 'canceled' }, ending(record, null));
  await Promise.all([reply({ state: 'canceled', reason: 'canceled' }, ended), release()]);
}

/**
 * Journals the outcome, gives the in-flight slot back (the call no longer runs; both are sent at once, so
 * they share a journal batch when they can), then answers.
 */
async function finish(
  parts: FreeCallParts,
  record: Call,
  call: Running,
  outcome: ServiceOutcome,
  reply: Reply,
  payload: unknown,
  release: () => Promise<void>,
): Promise<void> {
  // Hashed once, for the receipt and the journal (canonical JSON of a result up to 1 MiB).
  const hash = outcome.state === 'completed' ? resultHash(outcome.result) : undefined;
  const receipt = hash
    ? signReceipt(parts.identity, { task: call.task, capability: call.capability, caller: call.caller, result_hash: hash, at: parts.now() })
    : null;
  // A kept call keeps the receipt it is answered with, so a repeat of its task id gets the same one.
  const kept =
    payload !== null && receipt ? { ...(payload as object), receipt: receipt.bytes, receiptKsn: parts.identity.kel.ksn } : payload;
  const ended = record.outcome(outcomeEvent(parts, call, outcome, receipt?.cid, hash), ending(record, kept)).then(() => {
    if (outcome.state === 'completed') crashPoint('after-completed');
  });
  const released = release();
  // Awaited below; a failed journal write is reported through `ended` first.
  released.catch(() => {});
  const fields: Fields =
    outcome.state === 'completed'
      ? { state: 'completed', result: outcome.text, receipt: receipt!.bytes }
      : outcome.state === 'rejected'
        ? { state: 'rejected', reason: 'service_rejected', message: outcome.message }
        : { state: 'failed', reason: outcome.reason, detail: outcome.detail, retry_after_ms: outcome.retryAfterMs };
  // The answer is sealed while the outcome is written and leaves once it is durable.
  await reply(fields, ended);
  await released;
}
