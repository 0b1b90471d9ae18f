// One inbound call (SPEC §4, §9.1, §9.5, §10), journaled: received, then refused (`rejected` with its
// reason) or admitted and `working` while the service runs, then `completed`, `failed` or `rejected` as
// the §3.1 table says. A call still `working` when the node stopped ends `failed` with `interrupted` at
// the next start: it is never run again. Only sizes and hashes of the payload enter the journal.
//
// A priced call first waits in `quoted` (input-required) for the caller's payment until the quote's
// deadline; a payment goes `paying` (the hub holds the amount), then `working`; once a paid call's
// outcome is known it goes `settling` (the hold is captured for `completed` and `outcome_unknown`,
// released otherwise) and reaches its final state only when the hub has answered. A paid call that was
// interrupted releases its hold. So a crash at any step leaves a state that says what is still owed.
import { setup, assign, assertEvent } from 'xstate';

export type Settlement = 'capture' | 'release';
export type Ending = 'completed' | 'failed' | 'rejected' | 'canceled';

export interface CallContext {
  /** Random per delivery: tells the handler whether its RECEIVED was the first (a resend is ignored). */
  nonce: string;
  task: string;
  caller: string;
  capability: string;
  argsBytes: number;
  argsHash: string;
  receivedAt: number;
  endedAt: number | null;
  reason: string | null;
  detail: string | null;
  retryAfterMs: number | null;
  /** The service's own words, for `service_rejected`. */
  message: string | null;
  resultBytes: number | null;
  resultHash: string | null;
  /** CID of the receipt the caller was given. */
  receipt: string | null;
  /** The quote of a priced call: its id, amount (canonical decimal) and the end of its validity. */
  quoteId: string | null;
  amount: string | null;
  quoteExpiresAt: number | null;
  /** The payer's authorization nonce: the hub's key for the hold. Set once a payment arrived. */
  payNonce: string | null;
  holdTx: string | null;
  /** What a paid call owes the hub once its outcome is known, and the final state it then reaches. */
  settlement: Settlement | null;
  ending: Ending | null;
  settleTx: string | null;
  /** The hub's word on the settlement: captured, released, void (nothing was held) or expired. */
  settled: string | null;
}

export type CallEvent =
  | { type: 'RECEIVED'; at: number; nonce: string; task: string; caller: string; capability: string; argsBytes: number; argsHash: string }
  | { type: 'REFUSED'; at: number; reason: string; retryAfterMs?: number; detail?: string }
  | { type: 'STARTED'; at: number }
  | { type: 'COMPLETED'; at: number; resultBytes: number; resultHash: string; receipt: string }
  | { type: 'FAILED'; at: number; reason: string; detail?: string; retryAfterMs?: number }
  | { type: 'SERVICE_REJECTED'; at: number; message: string }
  | { type: 'INTERRUPTED'; at: number }
  | { type: 'QUOTED'; at: number; quoteId: string; amount: string; expiresAt: number }
  | { type: 'PAY'; at: number; payNonce: string }
  | { type: 'HELD'; at: number; tx: string }
  | { type: 'CANCELED'; at: number; reason: string }
  | { type: 'SETTLED'; at: number; tx: string; settled: string; receipt?: string }
  | { type: 'TICK'; at: number };

const ended = (at: number, fields: Partial<CallContext>) => ({ endedAt: at, ...fields });
const paid = ({ context }: { context: CallContext }) => context.payNonce !== null;
const endingIs =
  (e: Ending) =>
  ({ context }: { context: CallContext }) =>
    context.ending === e;

/** What the outcome events record; for a paid call the state waits in `settling`. */
const outcomes = {
  COMPLETED: [
    { guard: 'paid', actions: ['complete', 'owe'], target: 'settling' },
    { actions: 'complete', target: 'completed' },
  ],
  FAILED: [
    { guard: 'paid', actions: ['fail', 'owe'], target: 'settling' },
    { actions: 'fail', target: 'failed' },
  ],
  SERVICE_REJECTED: [
    { guard: 'paid', actions: ['serviceRejected', 'owe'], target: 'settling' },
    { actions: 'serviceRejected', target: 'rejected' },
  ],
  REFUSED: [
    { guard: 'paid', actions: ['refuse', 'owe'], target: 'settling' },
    { actions: 'refuse', target: 'rejected' },
  ],
  INTERRUPTED: [
    { guard: 'paid', actions: ['interrupt', 'owe'], target: 'settling' },
    { actions: 'interrupt', target: 'failed' },
  ],
  // The caller canceled the running call (issue 21): its service request was aborted; a hold is released.
  CANCELED: [
    { guard: 'paid', actions: ['cancel', 'owe'], target: 'settling' },
    { actions: 'cancel', target: 'canceled' },
  ],
} as const;

export const callMachine = setup({
  types: { context: {} as CallContext, events: {} as CallEvent },
  guards: {
    paid,
    quoteValid: ({ context, event }) => event.at < context.quoteExpiresAt!,
    quoteOver: ({ context, event }) => event.at >= context.quoteExpiresAt!,
    endsCompleted: endingIs('completed'),
    endsRejected: endingIs('rejected'),
    endsCanceled: endingIs('canceled'),
  },
  actions: {
    receive: assign(({ event }) => {
      assertEvent(event, 'RECEIVED');
      return {
        nonce: event.nonce,
        task: event.task,
        caller: event.caller,
        capability: event.capability,
        argsBytes: event.argsBytes,
        argsHash: event.argsHash,
        receivedAt: event.at,
      };
    }),
    refuse: assign(({ event }) => {
      assertEvent(event, 'REFUSED');
      return ended(event.at, { reason: event.reason, retryAfterMs: event.retryAfterMs ?? null, detail: event.detail ?? null });
    }),
    complete: assign(({ event }) => {
      assertEvent(event, 'COMPLETED');
      return ended(event.at, { resultBytes: event.resultBytes, resultHash: event.resultHash, receipt: event.receipt || null });
    }),
    fail: assign(({ event }) => {
      assertEvent(event, 'FAILED');
      return ended(event.at, { reason: event.reason, detail: event.detail ?? null, retryAfterMs: event.retryAfterMs ?? null });
    }),
    serviceRejected: assign(({ event }) => {
      assertEvent(event, 'SERVICE_REJECTED');
      return ended(event.at, { reason: 'service_rejected', message: event.message });
    }),
    interrupt: assign(({ event }) =>
      ended(event.at, { reason: 'interrupted', detail: 'the node stopped while the call ran; its outcome is unknown' }),
    ),
    // SPEC §10: capture when the call completed or its outcome is unknown; release when it did not run
    // or failed. An interrupted call releases: its caller gets no result from it.
    owe: assign(({ event }) => {
      const capture = event.type === 'COMPLETED' || (event.type === 'FAILED' && event.reason === 'outcome_unknown');
      const ending: Ending =
        event.type === 'COMPLETED'
          ? 'completed'
          : event.type === 'SERVICE_REJECTED' || event.type === 'REFUSED'
            ? 'rejected'
            : event.type === 'CANCELED'
              ? 'canceled'
              : 'failed';
      return { settlement: capture ? ('capture' as const) : ('release' as const), ending };
    }),
    quote: assign(({ event }) => {
      assertEvent(event, 'QUOTED');
      return { quoteId: event.quoteId, amount: event.amount, quoteExpiresAt: event.expiresAt };
    }),
    pay: assign(({ event }) => {
      assertEvent(event, 'PAY');
      return { payNonce: event.payNonce };
    }),
    hold: assign(({ event }) => {
      assertEvent(event, 'HELD');
      return { holdTx: event.tx };
    }),
    expire: assign(({ event }) => ended(event.at, { reason: 'quote_expired', detail: 'no payment arrived before the quote expired' })),
    cancel: assign(({ event }) => {
      assertEvent(event, 'CANCELED');
      return ended(event.at, { reason: event.reason });
    }),
    settle: assign(({ context, event }) => {
      assertEvent(event, 'SETTLED');
      return { settleTx: event.tx, settled: event.settled, receipt: event.receipt ?? context.receipt };
    }),
  },
}).createMachine({
  id: 'call',
  context: {
    nonce: '',
    task: '',
    caller: '',
    capability: '',
    argsBytes: 0,
    argsHash: '',
    receivedAt: 0,
    endedAt: null,
    reason: null,
    detail: null,
    retryAfterMs: null,
    message: null,
    resultBytes: null,
    resultHash: null,
    receipt: null,
    quoteId: null,
    amount: null,
    quoteExpiresAt: null,
    payNonce: null,
    holdTx: null,
    settlement: null,
    ending: null,
    settleTx: null,
    settled: null,
  },
  initial: 'new',
  states: {
    new: { on: { RECEIVED: { actions: 'receive', target: 'submitted' } } },
    // Admitted calls may end straight from here: STARTED is optional (text tasks use it), which saves a
    // journal write per capability call.
    submitted: {
      on: {
        REFUSED: { actions: 'refuse', target: 'rejected' },
        STARTED: 'working',
        QUOTED: { actions: 'quote', target: 'quoted' },
        COMPLETED: { actions: 'complete', target: 'completed' },
        FAILED: { actions: 'fail', target: 'failed' },
        SERVICE_REJECTED: { actions: 'serviceRejected', target: 'rejected' },
        INTERRUPTED: { actions: 'interrupt', target: 'failed' },
        CANCELED: { actions: 'cancel', target: 'canceled' },
      },
    },
    // input-required: the quote's deadline is this state's timer (the host arms it from the context).
    quoted: {
      on: {
        PAY: [
          { guard: 'quoteValid', actions: 'pay', target: 'paying' },
          { actions: 'expire', target: 'failed' },
        ],
        TICK: { guard: 'quoteOver', actions: 'expire', target: 'failed' },
        CANCELED: { actions: 'cancel', target: 'canceled' },
        FAILED: { actions: 'fail', target: 'failed' },
        INTERRUPTED: { actions: 'interrupt', target: 'failed' },
      },
    },
    // The hub is asked to hold the amount; an answer moves on, anything else is settled (released).
    paying: {
      on: {
        HELD: { actions: 'hold', target: 'working' },
        ...outcomes,
      },
    },
    working: { on: outcomes },
    settling: {
      on: {
        SETTLED: [
          { guard: 'endsCompleted', actions: 'settle', target: 'completed' },
          { guard: 'endsRejected', actions: 'settle', target: 'rejected' },
          { guard: 'endsCanceled', actions: 'settle', target: 'canceled' },
          { actions: 'settle', target: 'failed' },
        ],
      },
    },
    completed: { type: 'final' },
    failed: { type: 'final' },
    rejected: { type: 'final' },
    canceled: { type: 'final' },
  },
});

/** A call's timer: the end of its quote while it waits for payment. */
export const callDeadline = (value: unknown, context: CallContext): number | null => (value === 'quoted' ? context.quoteExpiresAt : null);
