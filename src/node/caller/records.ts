// A task the caller sent is a plain record in the `tasks` sublevel (not an actor: see "Actors and plain
// records" in docs/ARCHITECTURE.md). Every change to one goes through `next(record, event)` below: a pure
// table from the record and what happened to the record that follows, so the whole life of a task is
// read here, and tested alone (test/unit/caller-records.test.ts). The stored shape is unchanged since the
// first release: records written then still load (an old one without `payment` reads as null).
import { explain } from '../../protocol/reasons.js';
import { CHAT } from '../../protocol/messages.js';
import type { PaymentRecord } from './payment.js';

export type TaskState = 'submitted' | 'working' | 'input-required' | 'completed' | 'failed' | 'rejected' | 'canceled';

export interface TaskRecord {
  task: string;
  to: string;
  capability: string;
  state: TaskState;
  sentAt: number;
  updatedAt: number;
  reason: string | null;
  explanation: string | null;
  retryAfterMs: number | null;
  detail: string | null;
  message: string | null;
  result: unknown;
  /** CID of the provider's receipt when it verified; `invalid: …` when it did not. */
  receipt: string | null;
  /** A priced call's quote and payment (SPEC §10); null for free calls. */
  payment: PaymentRecord | null;
  /** The A2A contextId the client gave (issue 21); null when none (records from before read as null). */
  context: string | null;
}

export const FINAL: readonly TaskState[] = ['completed', 'failed', 'rejected', 'canceled'];
export const isFinal = (state: TaskState) => FINAL.includes(state);
/** A call whose quote the auto-pay rule left to the operator. */
export const awaitingOperator = (r: TaskRecord) => r.state === 'input-required' && r.payment?.decided === true;
/** A task needs no more resends once it has ended or been quoted (its payment takes over). */
export const resendsOver = (r: TaskRecord): boolean => isFinal(r.state) || Boolean(r.payment);

/** What a provider's `task.status` / `task.result` says, read from its body (answers.ts). */
export interface Answer {
  at: number;
  /** A state the caller knows, else null (the record keeps its own). */
  state: Exclude<TaskState, 'submitted'> | null;
  reason: string | null;
  retryAfterMs: number | null;
  detail: string | null;
  message: string | null;
}

/** A `completed` answer's result: JSON (with its receipt's CID, `invalid: …`, or null for a text task), or not JSON. */
export type Completed = { json: true; result: unknown; receipt: string | null } | { json: false };

export const ABANDONED_DETAIL =
  'the provider never answered after the payment; the hub has settled it by now: `anet balance` shows whether it was captured';
export const NOT_JSON_DETAIL = 'the provider sent a result that is not JSON';

export type TaskEvent =
  /** The first `task.send` could not be sent at all. */
  | { type: 'not-delivered'; at: number; detail: string }
  /** A quote (`input-required` from the provider, its PaymentRecord checked and journaled). */
  | { type: 'quoted'; answer: Answer; payment: PaymentRecord }
  /** Any other answer the record takes (see `answerStep`); `payment` as it stands after it, `completed` for a result. */
  | { type: 'answered'; answer: Answer; payment: PaymentRecord | null; completed?: Completed }
  /** The auto-pay rule's verdict: paid, or left to the operator. */
  | { type: 'decided'; at: number; payment: PaymentRecord }
  /** `anet pay`. */
  | { type: 'paid'; at: number; payment: PaymentRecord }
  /** `anet reject`. */
  | { type: 'rejected'; at: number; payment: PaymentRecord }
  /** At start: a payment authorized before a crash went out again (its record may still show the quote). */
  | { type: 'payment-resent'; nonce: string; auto: boolean }
  /** At start: an authorized payment whose provider never answered was given up. */
  | { type: 'abandoned'; at: number }
  /** The provider stayed silent through the resends. */
  | { type: 'unanswered'; at: number; detail: string };

/** A task just sent. */
export function newRecord(task: string, to: string, capability: string, at: number, context: string | null = null): TaskRecord {
  return {
    task,
    to,
    capability,
    state: 'submitted',
    sentAt: at,
    updatedAt: at,
    reason: null,
    explanation: null,
    retryAfterMs: null,
    detail: null,
    message: null,
    result: null,
    receipt: null,
    payment: null,
    context,
  };
}

/**
 * What an answer from the provider does to a task that has not ended: `ignore` (a second quote, a quote
 * after we paid, a quote on a text task, or `working` while the quote waits: the record stays), `quote`
 * (the payment part checks it first), or `take`.
 */
export function answerStep(rec: TaskRecord, answer: Answer): 'ignore' | 'quote' | 'take' {
  const state = answer.state ?? rec.state;
  if (state === 'input-required') return rec.payment || rec.capability === CHAT ? 'ignore' : 'quote';
  if (state === 'working' && rec.state === 'input-required') return 'ignore';
  return 'take';
}

/** The record after `event`. An event that does not apply returns `rec` itself (the caller then writes nothing). */
export function next(rec: TaskRecord, event: TaskEvent): TaskRecord {
  switch (event.type) {
    case 'not-delivered':
      return {
        ...rec,
        state: 'failed',
        reason: 'not_delivered',
        explanation: explain('not_delivered'),
        detail: event.detail,
        updatedAt: event.at,
      };
    case 'quoted':
      return {
        ...answered(rec, event.answer),
        payment: event.payment,
        reason: 'payment_required',
        explanation: explain('payment_required'),
        detail: event.payment.quoteError,
      };
    case 'answered':
      return completed({ ...answered(rec, event.answer), payment: event.payment }, event.completed);
    case 'decided': {
      const submitted = event.payment.status === 'payment-submitted';
      const reason = submitted ? null : event.payment.why?.includes('above the signed price') ? 'quote_above_price' : 'payment_required';
      return {
        ...rec,
        state: submitted ? 'working' : 'input-required',
        payment: event.payment,
        reason,
        explanation: reason && explain(reason),
        detail: submitted ? null : event.payment.why,
        updatedAt: event.at,
      };
    }
    case 'paid':
      return { ...rec, state: 'working', payment: event.payment, reason: null, explanation: null, detail: null, updatedAt: event.at };
    case 'rejected':
      return {
        ...rec,
        state: 'canceled',
        payment: event.payment,
        reason: 'payment_rejected',
        explanation: explain('payment_rejected'),
        detail: null,
        updatedAt: event.at,
      };
    case 'payment-resent':
      // Only a record the crash left at its quote: it was paid, so it now waits for the call.
      if (rec.state !== 'input-required' || !rec.payment) return rec;
      return {
        ...rec,
        state: 'working',
        reason: null,
        explanation: null,
        detail: null,
        payment: { ...rec.payment, status: 'payment-submitted', decided: true, auto: event.auto, nonce: event.nonce },
      };
    case 'abandoned':
      if (isFinal(rec.state)) return rec;
      return {
        ...rec,
        state: 'failed',
        reason: 'outcome_unknown',
        explanation: explain('outcome_unknown'),
        detail: ABANDONED_DETAIL,
        updatedAt: event.at,
      };
    case 'unanswered':
      return {
        ...rec,
        state: 'failed',
        reason: 'outcome_unknown',
        explanation: explain('outcome_unknown'),
        retryAfterMs: null,
        detail: event.detail,
        updatedAt: event.at,
      };
  }
}

/** The provider's words on the record: its state (when known), reason, wait, detail and message. */
function answered(rec: TaskRecord, a: Answer): TaskRecord {
  return {
    ...rec,
    state: a.state ?? rec.state,
    updatedAt: a.at,
    reason: a.reason,
    explanation: a.reason ? explain(a.reason) : null,
    retryAfterMs: a.retryAfterMs,
    detail: a.detail,
    message: a.message,
  };
}

/** A completed task keeps its result and receipt; a result that is not JSON fails it. */
function completed(rec: TaskRecord, c: Completed | undefined): TaskRecord {
  if (rec.state !== 'completed' || !c) return rec;
  if (!c.json) return { ...rec, state: 'failed', reason: 'service_error', explanation: explain('service_error'), detail: NOT_JSON_DETAIL };
  // A text task's answer is the operator's words: no receipt (SPEC §9.4 is for capability calls).
  return rec.capability === CHAT ? { ...rec, result: c.result } : { ...rec, result: c.result, receipt: c.receipt };
}

/** The record as shown at `now`: a quote nobody paid in time is what it became, as nothing more can happen to the task. */
export function shownAt(rec: TaskRecord, now: number): TaskRecord {
  // Records written before payments (or contexts) existed have no `payment` (`context`) field: shown as null.
  const shown = { ...rec, payment: rec.payment ?? null, context: rec.context ?? null };
  if (rec.state !== 'input-required' || !rec.payment || now < rec.payment.expiresAt) return shown;
  return { ...shown, state: 'failed', reason: 'quote_expired', explanation: explain('quote_expired'), detail: null };
}
