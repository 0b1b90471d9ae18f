// One inbound capability call (SPEC §4, §9.1, §9.5), journaled: received, then refused (`rejected` with
// its reason) or admitted and `working` while the service runs, then `completed`, `failed` or `rejected`
// as the §3.1 table says. A call still `working` when the node stopped ends `failed` with `interrupted`
// at the next start: it is never run again. Only sizes and hashes of the payload enter the journal.
import { setup, assign } from 'xstate';

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
}

export type CallEvent =
  | { type: 'RECEIVED'; at: number; nonce: string; task: string; caller: string; capability: string; argsBytes: number; argsHash: string }
  | { type: 'REFUSED'; at: number; reason: string; retryAfterMs?: number; detail?: string }
  | { type: 'STARTED'; at: number }
  | { type: 'COMPLETED'; at: number; resultBytes: number; resultHash: string; receipt: string }
  | { type: 'FAILED'; at: number; reason: string; detail?: string; retryAfterMs?: number }
  | { type: 'SERVICE_REJECTED'; at: number; message: string }
  | { type: 'INTERRUPTED'; at: number };

type E<T extends CallEvent['type']> = Extract<CallEvent, { type: T }>;

const ended = (at: number, fields: Partial<CallContext>) => ({ endedAt: at, ...fields });

export const callMachine = setup({
  types: { context: {} as CallContext, events: {} as CallEvent },
  actions: {
    receive: assign(({ event }) => {
      const e = event as E<'RECEIVED'>;
      return { nonce: e.nonce, task: e.task, caller: e.caller, capability: e.capability, argsBytes: e.argsBytes, argsHash: e.argsHash, receivedAt: e.at };
    }),
    refuse: assign(({ event }) => {
      const e = event as E<'REFUSED'>;
      return ended(e.at, { reason: e.reason, retryAfterMs: e.retryAfterMs ?? null, detail: e.detail ?? null });
    }),
    complete: assign(({ event }) => {
      const e = event as E<'COMPLETED'>;
      return ended(e.at, { resultBytes: e.resultBytes, resultHash: e.resultHash, receipt: e.receipt });
    }),
    fail: assign(({ event }) => {
      const e = event as E<'FAILED'>;
      return ended(e.at, { reason: e.reason, detail: e.detail ?? null, retryAfterMs: e.retryAfterMs ?? null });
    }),
    serviceRejected: assign(({ event }) => {
      const e = event as E<'SERVICE_REJECTED'>;
      return ended(e.at, { reason: 'service_rejected', message: e.message });
    }),
    interrupt: assign(({ event }) => ended(event.at, { reason: 'interrupted', detail: 'the node stopped while the call ran; its outcome is unknown' })),
  },
}).createMachine({
  id: 'call',
  context: {
    nonce: '',
    task: '', caller: '', capability: '', argsBytes: 0, argsHash: '', receivedAt: 0, endedAt: null,
    reason: null, detail: null, retryAfterMs: null, message: null, resultBytes: null, resultHash: null, receipt: null,
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
        COMPLETED: { actions: 'complete', target: 'completed' },
        FAILED: { actions: 'fail', target: 'failed' },
        SERVICE_REJECTED: { actions: 'serviceRejected', target: 'rejected' },
        INTERRUPTED: { actions: 'interrupt', target: 'failed' },
      },
    },
    working: {
      on: {
        COMPLETED: { actions: 'complete', target: 'completed' },
        FAILED: { actions: 'fail', target: 'failed' },
        SERVICE_REJECTED: { actions: 'serviceRejected', target: 'rejected' },
        INTERRUPTED: { actions: 'interrupt', target: 'failed' },
      },
    },
    completed: { type: 'final' },
    failed: { type: 'final' },
    rejected: { type: 'final' },
  },
});
