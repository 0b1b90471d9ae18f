// The caller's side of one payment (SPEC §10), per provider and task: `quoted` (input-required, until
// the quote's deadline) → `authorized` (the signed authorization went out: its nonce and validBefore
// are in the journaled event, and Ed25519 is deterministic, so a resend after a crash is the same bytes
// and the hub's idempotency makes it one payment) → `completed` or `failed` by the provider's final
// answer; `rejected` by the operator; `expired` at the quote's deadline; `abandoned` when the provider
// never answered and the hub has settled the payment one way or the other (see UNANSWERED_MS). Time comes
// only from events.
import { setup, assign, assertEvent } from 'xstate';

/**
 * After the authorization's validBefore, how long until the caller stops waiting for the provider's
 * answer: a hold is taken before validBefore and the hub gives it back after 24 h unless it was
 * captured, so by then the payment is final on the hub (an hour more for clocks and the hub's sweep).
 */
export const UNANSWERED_MS = 25 * 3_600_000;

/** Whether an authorized payment's provider has had all the time it could use to answer, at `at`. */
export const unanswered = (c: Pick<PaymentContext, 'validBefore'>, at: number) =>
  c.validBefore !== null && at >= c.validBefore + UNANSWERED_MS;

export interface PaymentContext {
  task: string;
  provider: string;
  skillId: string;
  quoteId: string;
  amount: string;
  expiresAt: number;
  /** Set by AUTHORIZE: the hub's idempotency key and the authorization's end of validity. */
  nonce: string | null;
  validBefore: number | null;
  /** Paid without asking the operator (counted in payments.daily_max). */
  auto: boolean | null;
  hubTx: string | null;
  deadline: number | null;
}

export type PaymentEvent =
  | { type: 'QUOTE'; at: number; task: string; provider: string; skillId: string; quoteId: string; amount: string; expiresAt: number }
  | { type: 'AUTHORIZE'; at: number; nonce: string; validBefore: number; auto: boolean }
  | { type: 'REJECT'; at: number }
  | { type: 'SETTLED'; at: number; captured: boolean; hubTx: string }
  /** The provider never answered: the caller stops waiting (only once UNANSWERED_MS have passed). */
  | { type: 'ABANDON'; at: number }
  | { type: 'TICK'; at: number };

export const paymentMachine = setup({
  types: { context: {} as PaymentContext, events: {} as PaymentEvent },
  guards: {
    standing: ({ context, event }) => event.at < context.expiresAt,
    over: ({ context, event }) => event.at >= context.expiresAt,
    captured: ({ event }) => {
      assertEvent(event, 'SETTLED');
      return event.captured;
    },
    unanswered: ({ context, event }) => unanswered(context, event.at),
  },
  actions: {
    quote: assign(({ event }) => {
      assertEvent(event, 'QUOTE');
      return {
        task: event.task,
        provider: event.provider,
        skillId: event.skillId,
        quoteId: event.quoteId,
        amount: event.amount,
        expiresAt: event.expiresAt,
        deadline: event.expiresAt,
      };
    }),
    authorize: assign(({ event }) => {
      assertEvent(event, 'AUTHORIZE');
      return { nonce: event.nonce, validBefore: event.validBefore, auto: event.auto, deadline: null };
    }),
    settle: assign(({ event }) => {
      assertEvent(event, 'SETTLED');
      return { hubTx: event.hubTx || null };
    }),
    stop: assign({ deadline: null }),
  },
}).createMachine({
  id: 'payment',
  context: {
    task: '',
    provider: '',
    skillId: '',
    quoteId: '',
    amount: '',
    expiresAt: 0,
    nonce: null,
    validBefore: null,
    auto: null,
    hubTx: null,
    deadline: null,
  },
  initial: 'new',
  states: {
    new: { on: { QUOTE: { actions: 'quote', target: 'quoted' } } },
    quoted: {
      on: {
        AUTHORIZE: [
          { guard: 'standing', actions: 'authorize', target: 'authorized' },
          { actions: 'stop', target: 'expired' },
        ],
        REJECT: { actions: 'stop', target: 'rejected' },
        TICK: { guard: 'over', actions: 'stop', target: 'expired' },
        // The provider ended the task first (a restart, an expiry on its clock).
        SETTLED: { actions: 'stop', target: 'failed' },
      },
    },
    authorized: {
      on: {
        SETTLED: [
          { guard: 'captured', actions: 'settle', target: 'completed' },
          { actions: 'settle', target: 'failed' },
        ],
        ABANDON: { guard: 'unanswered', target: 'abandoned' },
      },
    },
    completed: { type: 'final' },
    failed: { type: 'final' },
    rejected: { type: 'final' },
    expired: { type: 'final' },
    abandoned: { type: 'final' },
  },
});
