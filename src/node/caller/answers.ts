// The provider's answers to a task (PROTOCOL §6.6–6.7): `task.status` and `task.result`, read into an
// Answer, and the record that follows. A quote goes to the payment part to be checked and journaled; a
// final answer of a priced task journals what the hub did with the payment; a contact credential in the
// answer is kept, its absence in a final answer drops ours; a result is JSON and its receipt is checked
// against the provider's KEL. Only the provider asked, and only before the task ended (index.ts).
import type { Reader } from '../../reader/reader.js';
import { checkReceipt } from '../../protocol/receipt.js';
import { checkCredential, type Contacts } from '../../contacts/credential.js';
import { CHAT } from '../../protocol/messages.js';
import type { Payer, PaymentRecord } from './payment.js';
import { answerStep, isFinal, next, type Answer, type Completed, type TaskRecord, type TaskState } from './records.js';

export interface AnswerParts {
  me: string;
  reader: Pick<Reader, 'kel'>;
  contacts: Pick<Contacts, 'keep' | 'forget'>;
  payer: Pick<Payer, 'quoted' | 'settled'>;
  now: () => number;
}

const KNOWN: Answer['state'][] = ['working', 'input-required', 'completed', 'failed', 'rejected', 'canceled'];

/** Longest wait a provider may ask for; its service's Retry-After is capped alike (src/service/call.ts). */
const MAX_RETRY_AFTER_MS = 24 * 3_600_000;

/** What an answer's body says; anything not of its type is read as absent. */
export function readAnswer(body: Record<string, unknown>, at: number): Answer {
  const reason = typeof body.reason === 'string' ? body.reason : null;
  return {
    at,
    state: KNOWN.find((s) => s === body.state) ?? null,
    reason,
    retryAfterMs: retryAfterOf(body.retry_after_ms),
    detail: typeof body.detail === 'string' ? body.detail : null,
    message: typeof body.message === 'string' ? body.message : null,
  };
}

/** The provider's `retry_after_ms` as a whole number of ms within a day: a peer's number is not trusted. */
export function retryAfterOf(value: unknown): number | null {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) return null;
  return Math.min(Math.ceil(value), MAX_RETRY_AFTER_MS);
}

/** The record after the provider's answer `body`, received at `at`. */
export async function takeAnswer(parts: AnswerParts, rec: TaskRecord, body: Record<string, unknown>, at: number): Promise<TaskRecord> {
  const answer = readAnswer(body, at);
  const step = answerStep(rec, answer);
  if (step === 'ignore') return rec;
  if (step === 'quote') return next(rec, { type: 'quoted', answer, payment: await parts.payer.quoted(rec, body, at) });
  const state: TaskState = answer.state ?? rec.state;
  const payment = isFinal(state) && rec.payment ? await parts.payer.settled(rec, body) : rec.payment;
  await takeCredential(parts, rec.to, body.credential, isFinal(state));
  const completed = state === 'completed' ? await resultOf(parts, rec, body.result, body.receipt, payment) : undefined;
  return next(rec, { type: 'answered', answer, payment, ...(completed ? { completed } : {}) });
}

/** A credential in the answer renews ours; a final answer without one means we are off the provider's lists. */
async function takeCredential(parts: AnswerParts, from: string, credential: unknown, final: boolean): Promise<void> {
  if (credential instanceof Uint8Array) {
    const kel = await parts.reader.kel(from);
    if (kel && checkCredential(credential, { iss: from, sub: parts.me, kel, now: parts.now() }).ok)
      await parts.contacts.keep(from, credential);
  } else if (final) await parts.contacts.forget(from);
}

/** A result is JSON; a call's result comes with a receipt signed by the provider, checked against its KEL. */
async function resultOf(
  parts: AnswerParts,
  rec: TaskRecord,
  text: unknown,
  receipt: unknown,
  payment: PaymentRecord | null,
): Promise<Completed> {
  let result: unknown = null;
  try {
    result = JSON.parse(String(text));
  } catch {
    return { json: false };
  }
  // A text task's answer is the operator's words: no receipt (SPEC §9.4 is for capability calls).
  if (rec.capability === CHAT) return { json: true, result, receipt: null };
  const kel = await parts.reader.kel(rec.to);
  const paid = payment?.status === 'payment-completed' ? { amount: payment.quote!.amount, hubTx: payment.hubTx ?? '' } : {};
  const check =
    kel && receipt instanceof Uint8Array
      ? checkReceipt(receipt, { kel, task: rec.task, caller: parts.me, capability: rec.capability, result, ...paid })
      : { ok: false as const, why: 'no receipt' };
  return { json: true, result, receipt: check.ok ? check.cid : `invalid: ${check.why}` };
}
