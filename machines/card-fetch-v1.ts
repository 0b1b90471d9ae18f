// FROZEN: the first version of the card-fetch machine (kind `card-fetch`), kept only so that journals
// written before `card-fetch-v2` replay and verify exactly; no new actor of this kind is made. Its 60 s
// guard was a condition on `idle` rather than a state. Do not change it: its transitions are data.
//
// The reader's extended-card fetch for one provider (SPEC §6.1–6.3), every timing an explicit state:
// `waiting` (at most 10 s for the answer), `cached` (24 h, stale at once on a newer public seq), and the
// 60 s guard after any attempt (`guarded` decisions while it holds). Pure: time and the request id come
// in events; the host sends the request when a NEED ends in `waiting` with a new request id, and reports
// `unreachable` when it could not be sent at all.
import { setup, assign } from 'xstate';

const WAIT_MS = 10_000;
const CACHE_MS = 24 * 3_600_000;
const GUARD_MS = 60_000;

type Outcome =
  | { kind: 'ok'; wire: string; fetchedAt: number }
  | { kind: 'not_configured'; fetchedAt: number }
  | { kind: 'card_unavailable' }
  | { kind: 'card_signature_invalid' };

export interface CardFetchV1Context {
  /** The provider's public card seq the cached answer belongs to. */
  publicSeq: string | null;
  lastAttemptAt: number | null;
  requestId: string | null;
  waitUntil: number | null;
  expiresAt: number | null;
  outcome: Outcome | null;
  /** What the last NEED decided: fetch now, serve the cache, or hold back (60 s guard). */
  decision: 'fetch' | 'cached' | 'guarded' | null;
  /** The next moment this machine must be woken (the host arms it). */
  deadline: number | null;
}

type CardFetchEvent =
  | { type: 'NEED'; at: number; publicSeq: string; requestId: string }
  | { type: 'REPLY'; at: number; requestId: string; result: 'ok' | 'not_configured' | 'invalid' | 'unreachable'; wire?: string }
  | { type: 'PUBLIC_SEQ'; at: number; publicSeq: string }
  | { type: 'TICK'; at: number };

type E<T extends CardFetchEvent['type']> = Extract<CardFetchEvent, { type: T }>;

const guardHolds = (c: CardFetchV1Context, at: number) => c.lastAttemptAt !== null && at < c.lastAttemptAt + GUARD_MS;
const newerSeq = (c: CardFetchV1Context, seq: string) => c.publicSeq !== null && BigInt(seq) > BigInt(c.publicSeq);
const fresh = (c: CardFetchV1Context, e: E<'NEED'>) => c.expiresAt !== null && e.at < c.expiresAt && !newerSeq(c, e.publicSeq);

export const cardFetchMachineV1 = setup({
  types: { context: {} as CardFetchV1Context, events: {} as CardFetchEvent },
  guards: {
    freshCache: ({ context, event }) => fresh(context, event as E<'NEED'>),
    guarded: ({ context, event }) => guardHolds(context, event.at),
    ourReply: ({ context, event }) => (event as E<'REPLY'>).requestId === context.requestId,
    replyOk: ({ context, event }) => {
      const e = event as E<'REPLY'>;
      return e.requestId === context.requestId && (e.result === 'ok' || e.result === 'not_configured');
    },
    unreachable: ({ context, event }) =>
      (event as E<'REPLY'>).requestId === context.requestId && (event as E<'REPLY'>).result === 'unreachable',
    waitOver: ({ context, event }) => context.waitUntil !== null && event.at >= context.waitUntil,
    cacheOver: ({ context, event }) => context.expiresAt !== null && event.at >= context.expiresAt,
    seqMovedOn: ({ context, event }) => newerSeq(context, (event as E<'PUBLIC_SEQ'>).publicSeq),
  },
  actions: {
    serveCache: assign({ decision: 'cached' as const }),
    holdBack: assign({ decision: 'guarded' as const }),
    request: assign(({ event }) => {
      const e = event as E<'NEED'>;
      return {
        decision: 'fetch' as const,
        publicSeq: e.publicSeq,
        lastAttemptAt: e.at,
        requestId: e.requestId,
        waitUntil: e.at + WAIT_MS,
        deadline: e.at + WAIT_MS,
      };
    }),
    store: assign(({ event }) => {
      const e = event as E<'REPLY'>;
      const outcome: Outcome =
        e.result === 'ok' ? { kind: 'ok', wire: e.wire ?? '', fetchedAt: e.at } : { kind: 'not_configured', fetchedAt: e.at };
      return { outcome, requestId: null, waitUntil: null, expiresAt: e.at + CACHE_MS, deadline: e.at + CACHE_MS };
    }),
    invalid: assign({
      outcome: { kind: 'card_signature_invalid' } as Outcome,
      requestId: null,
      waitUntil: null,
      expiresAt: null,
      deadline: null,
    }),
    unavailable: assign({
      outcome: { kind: 'card_unavailable' } as Outcome,
      requestId: null,
      waitUntil: null,
      expiresAt: null,
      deadline: null,
    }),
    expire: assign({ expiresAt: null, deadline: null }),
  },
}).createMachine({
  id: 'cardFetch',
  context: {
    publicSeq: null,
    lastAttemptAt: null,
    requestId: null,
    waitUntil: null,
    expiresAt: null,
    outcome: null,
    decision: null,
    deadline: null,
  },
  initial: 'idle',
  states: {
    /** Nothing usable held: a NEED fetches unless an attempt was made in the last 60 s. */
    idle: {
      on: {
        NEED: [
          { guard: 'guarded', actions: 'holdBack' },
          { actions: 'request', target: 'waiting' },
        ],
      },
    },
    /** A request is out; its answer is awaited for 10 s at most. */
    waiting: {
      on: {
        NEED: { actions: 'holdBack' },
        REPLY: [
          { guard: 'replyOk', actions: 'store', target: 'cached' },
          // The request could not be sent (no key set, hub down): unavailable now, not after 10 s.
          { guard: 'unreachable', actions: 'unavailable', target: 'idle' },
          { guard: 'ourReply', actions: 'invalid', target: 'idle' },
        ],
        TICK: { guard: 'waitOver', actions: 'unavailable', target: 'idle' },
      },
    },
    /** A verified answer (card or not_configured) for 24 h, or until the public seq moves on. */
    cached: {
      on: {
        NEED: [
          { guard: 'freshCache', actions: 'serveCache' },
          { guard: 'guarded', actions: ['expire', 'holdBack'], target: 'idle' },
          { actions: 'request', target: 'waiting' },
        ],
        PUBLIC_SEQ: { guard: 'seqMovedOn', actions: 'expire', target: 'idle' },
        TICK: { guard: 'cacheOver', actions: 'expire', target: 'idle' },
      },
    },
  },
});
