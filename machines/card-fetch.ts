// The reader's extended-card fetch for one provider and kind (SPEC §6.1–6.3), kind `card-fetch-v2`. Every
// timing is an explicit state with its deadline in context:
//   idle     nothing asked in the last 60 s; a NEED asks the provider
//   waiting  a request is out: its answer is awaited 10 s at most
//   cached   a verified answer (card or not_configured) for 24 h, stale at once on a newer public seq
//   guarded  the last attempt failed less than 60 s ago: the same card is not asked for again until then
// The guard is "the same card": a newer public seq is a new card (its prices may have changed), so it is
// asked for at once. After a success the cache answers every NEED of that seq, so the guard only ever
// follows a failed attempt. The last verified answer is `held` for its 24 h even once its seq is stale,
// so a reader whose newest fetch failed can still show (and pay under) what the provider last signed.
// Pure: time and the request id come in events; the host sends the request when a NEED ends in
// `waiting` with a new request id, and reports `unreachable` when it could not be sent at all.
import { setup, assign, assertEvent } from 'xstate';

export const WAIT_MS = 10_000;
export const CACHE_MS = 24 * 3_600_000;
export const GUARD_MS = 60_000;

/** A verified answer; a card keeps the digest of what was signed (the audit names it). */
export type Answer = { kind: 'ok'; wire: string; fetchedAt: number; digest?: string } | { kind: 'not_configured'; fetchedAt: number };

export type Outcome = Answer | { kind: 'card_unavailable' } | { kind: 'card_signature_invalid' };

/** The last verified answer: the public seq it extends, and when its 24 h end. */
export interface Held {
  answer: Answer;
  publicSeq: string;
  expiresAt: number;
}

export interface CardFetchContext {
  /** The provider's public card seq of the last attempt. */
  publicSeq: string | null;
  lastAttemptAt: number | null;
  requestId: string | null;
  waitUntil: number | null;
  /** While `guarded`: when the same card may be asked for again. */
  guardUntil: number | null;
  /** How the last attempt ended. */
  outcome: Outcome | null;
  held: Held | null;
  /** What the last NEED decided: ask now, serve the cache, wait for the request out, or hold back. */
  decision: 'fetch' | 'cached' | 'waiting' | 'guarded' | null;
  /** The next moment this machine must be woken (the host arms it). */
  deadline: number | null;
}

export type CardFetchEvent =
  | { type: 'NEED'; at: number; publicSeq: string; requestId: string }
  // `seq`: the public seq the card extends, when newer than the one asked for (the provider moved on).
  | {
      type: 'REPLY';
      at: number;
      requestId: string;
      result: 'ok' | 'not_configured' | 'invalid' | 'unreachable';
      wire?: string;
      digest?: string;
      seq?: string;
    }
  | { type: 'PUBLIC_SEQ'; at: number; publicSeq: string }
  | { type: 'TICK'; at: number };

const newer = (seq: string, than: string | null) => than === null || BigInt(seq) > BigInt(than);
const heldAt = (held: Held | null, at: number) => (held !== null && at < held.expiresAt ? held : null);
const ours = (c: CardFetchContext, e: CardFetchEvent) => e.type === 'REPLY' && e.requestId === c.requestId;

export const cardFetchMachine = setup({
  types: { context: {} as CardFetchContext, events: {} as CardFetchEvent },
  guards: {
    freshCache: ({ context, event }) => {
      assertEvent(event, 'NEED');
      return heldAt(context.held, event.at) !== null && !newer(event.publicSeq, context.held!.publicSeq);
    },
    // A newer public seq is another card; and a NEED at the guard's end need not wait for its TICK.
    mayAsk: ({ context, event }) => {
      assertEvent(event, 'NEED');
      return newer(event.publicSeq, context.publicSeq) || event.at >= context.guardUntil!;
    },
    replyOk: ({ context, event }) => {
      assertEvent(event, 'REPLY');
      return ours(context, event) && (event.result === 'ok' || event.result === 'not_configured');
    },
    unreachable: ({ context, event }) => {
      assertEvent(event, 'REPLY');
      return ours(context, event) && event.result === 'unreachable';
    },
    ourReply: ({ context, event }) => ours(context, event),
    waitOver: ({ context, event }) => context.waitUntil !== null && event.at >= context.waitUntil,
    guardOver: ({ context, event }) => context.guardUntil !== null && event.at >= context.guardUntil,
    cacheOver: ({ context, event }) => context.held !== null && event.at >= context.held.expiresAt,
    seqMovedOn: ({ context, event }) => {
      assertEvent(event, 'PUBLIC_SEQ');
      return context.held !== null && newer(event.publicSeq, context.held.publicSeq);
    },
  },
  actions: {
    serveCache: assign({ decision: 'cached' as const }),
    stillWaiting: assign({ decision: 'waiting' as const }),
    holdBack: assign(({ context, event }) => ({ decision: 'guarded' as const, held: heldAt(context.held, event.at) })),
    request: assign(({ context, event }) => {
      assertEvent(event, 'NEED');
      return {
        decision: 'fetch' as const,
        publicSeq: event.publicSeq,
        lastAttemptAt: event.at,
        requestId: event.requestId,
        waitUntil: event.at + WAIT_MS,
        guardUntil: null,
        held: heldAt(context.held, event.at),
        deadline: event.at + WAIT_MS,
      };
    }),
    store: assign(({ context, event }) => {
      assertEvent(event, 'REPLY');
      const answer: Answer =
        event.result === 'ok'
          ? { kind: 'ok', wire: event.wire ?? '', fetchedAt: event.at, ...(event.digest ? { digest: event.digest } : {}) }
          : { kind: 'not_configured', fetchedAt: event.at };
      const publicSeq = event.seq !== undefined && newer(event.seq, context.publicSeq) ? event.seq : context.publicSeq!;
      const held: Held = { answer, publicSeq, expiresAt: event.at + CACHE_MS };
      return { outcome: answer, held, requestId: null, waitUntil: null, deadline: held.expiresAt };
    }),
    // A failed attempt starts the 60 s guard, counted from the attempt (not from its end).
    unavailable: assign(({ context }) => ({
      outcome: { kind: 'card_unavailable' } as Outcome,
      requestId: null,
      waitUntil: null,
      guardUntil: context.lastAttemptAt! + GUARD_MS,
      deadline: context.lastAttemptAt! + GUARD_MS,
    })),
    // A card that fails its checks came from the provider: what it signed before is not shown over it.
    invalid: assign(({ context }) => ({
      outcome: { kind: 'card_signature_invalid' } as Outcome,
      held: null,
      requestId: null,
      waitUntil: null,
      guardUntil: context.lastAttemptAt! + GUARD_MS,
      deadline: context.lastAttemptAt! + GUARD_MS,
    })),
    endGuard: assign({ guardUntil: null, deadline: null }),
    stale: assign({ deadline: null }),
    expire: assign({ held: null, deadline: null }),
  },
}).createMachine({
  id: 'cardFetch',
  context: {
    publicSeq: null,
    lastAttemptAt: null,
    requestId: null,
    waitUntil: null,
    guardUntil: null,
    outcome: null,
    held: null,
    decision: null,
    deadline: null,
  },
  initial: 'idle',
  states: {
    idle: {
      on: { NEED: { actions: 'request', target: 'waiting' } },
    },
    waiting: {
      on: {
        NEED: { actions: 'stillWaiting' },
        REPLY: [
          { guard: 'replyOk', actions: 'store', target: 'cached' },
          // The request could not be sent (no key set, hub down): unavailable now, not after 10 s.
          { guard: 'unreachable', actions: 'unavailable', target: 'guarded' },
          { guard: 'ourReply', actions: 'invalid', target: 'guarded' },
        ],
        TICK: { guard: 'waitOver', actions: 'unavailable', target: 'guarded' },
      },
    },
    cached: {
      on: {
        NEED: [
          { guard: 'freshCache', actions: 'serveCache' },
          { actions: 'request', target: 'waiting' },
        ],
        PUBLIC_SEQ: { guard: 'seqMovedOn', actions: 'stale', target: 'idle' },
        TICK: { guard: 'cacheOver', actions: 'expire', target: 'idle' },
      },
    },
    guarded: {
      on: {
        NEED: [{ guard: 'mayAsk', actions: 'request', target: 'waiting' }, { actions: 'holdBack' }],
        TICK: { guard: 'guardOver', actions: 'endGuard', target: 'idle' },
      },
    },
  },
});
