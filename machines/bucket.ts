// Rate-limit bucket (SPEC §2.1, §4.1): an exact sliding window. Never more than `limit` admitted calls in
// any interval of `windowMs`; a refused call consumes nothing; `retryAfterMs` is the time until the oldest
// counted call leaves the window. Windows are half-open: a call at t and one at t + windowMs never count
// together. Pure: time comes in events (`at`), and the one deadline — when the
// oldest stamp leaves a full window — is in context, so a host can re-arm it after a restart.
import { setup, assign } from 'xstate';

export interface BucketInput {
  limit: number;
  windowMs: number;
}

export interface BucketContext extends BucketInput {
  /** Times of the admitted calls still inside the window, oldest first. */
  stamps: number[];
  /** Outcome of the last ADMIT: what the host returns to the caller. */
  last: { admitted: true } | { admitted: false; retryAfterMs: number } | null;
  /** When the window next frees a slot while full; null while open. */
  deadline: number | null;
}

export type BucketEvent =
  | { type: 'ADMIT'; at: number }
  | { type: 'UNDO'; at: number; stamp: number }
  | { type: 'TICK'; at: number }
  /** The configured limit or window changed (config is read at start). */
  | { type: 'CONFIGURE'; at: number; input: BucketInput };

function live(ctx: BucketContext, at: number): number[] {
  const from = at - ctx.windowMs;
  let i = 0;
  while (i < ctx.stamps.length && ctx.stamps[i]! <= from) i++;
  return i === 0 ? ctx.stamps : ctx.stamps.slice(i);
}

function deadlineOf(ctx: BucketInput, stamps: number[]): number | null {
  return stamps.length >= ctx.limit ? stamps[stamps.length - ctx.limit]! + ctx.windowMs : null;
}

export const bucketMachine = setup({
  types: {
    context: {} as BucketContext,
    events: {} as BucketEvent,
    input: {} as BucketInput,
  },
  guards: {
    hasRoom: ({ context, event }) => live(context, event.at).length < context.limit,
    /** Room for this call, and the window is full once it is counted. */
    fillsUp: ({ context, event }) => live(context, event.at).length === context.limit - 1,
    fullNow: ({ context, event }) => live(context, event.at).length >= context.limit,
    fullReconfigured: ({ context, event }) => {
      const next = { ...context, ...(event as Extract<BucketEvent, { type: 'CONFIGURE' }>).input };
      return live(next, event.at).length >= next.limit;
    },
    fullAfterUndo: ({ context, event }) => {
      const e = event as Extract<BucketEvent, { type: 'UNDO' }>;
      return live(context, e.at).length - (context.stamps.includes(e.stamp) && e.stamp > e.at - context.windowMs ? 1 : 0) >= context.limit;
    },
  },
  actions: {
    admit: assign(({ context, event }) => {
      // A clock that stepped back must not unsort the window: count the call at the latest stamp.
      const at = Math.max(event.at, context.stamps[context.stamps.length - 1] ?? -Infinity);
      const stamps = [...live(context, at), at];
      return { stamps, last: { admitted: true } as const, deadline: deadlineOf(context, stamps) };
    }),
    refuse: assign(({ context, event }) => {
      const stamps = live(context, event.at);
      const retryAfterMs = stamps[stamps.length - context.limit]! + context.windowMs - event.at;
      return { stamps, last: { admitted: false, retryAfterMs } as const, deadline: deadlineOf(context, stamps) };
    }),
    undo: assign(({ context, event }) => {
      const e = event as Extract<BucketEvent, { type: 'UNDO' }>;
      const at = context.stamps.lastIndexOf(e.stamp);
      const stamps = at < 0 ? context.stamps : [...context.stamps.slice(0, at), ...context.stamps.slice(at + 1)];
      const kept = live({ ...context, stamps }, e.at);
      return { stamps: kept, deadline: deadlineOf(context, kept) };
    }),
    configure: assign(({ context, event }) => {
      const { limit, windowMs } = (event as Extract<BucketEvent, { type: 'CONFIGURE' }>).input;
      const next = { ...context, limit, windowMs };
      const stamps = live(next, event.at);
      return { limit, windowMs, stamps, deadline: deadlineOf(next, stamps) };
    }),
    prune: assign(({ context, event }) => {
      const stamps = live(context, event.at);
      return { stamps, deadline: deadlineOf(context, stamps) };
    }),
  },
}).createMachine({
  id: 'bucket',
  context: ({ input }) => ({ ...input, stamps: [], last: null, deadline: null }),
  initial: 'open',
  // `limited` while the window is full (deadline set: when the oldest stamp leaves), else `open`.
  // Transitions that keep the state are targetless, so replay does no exit/entry work for them.
  states: {
    open: {
      on: {
        ADMIT: [{ guard: 'fillsUp', actions: 'admit', target: 'limited' }, { actions: 'admit' }],
        UNDO: { actions: 'undo' },
        TICK: { actions: 'prune' },
        CONFIGURE: [{ guard: 'fullReconfigured', actions: 'configure', target: 'limited' }, { actions: 'configure' }],
      },
    },
    limited: {
      on: {
        ADMIT: [
          { guard: 'fillsUp', actions: 'admit' },
          { guard: 'hasRoom', actions: 'admit', target: 'open' },
          { actions: 'refuse' },
        ],
        UNDO: [{ guard: 'fullAfterUndo', actions: 'undo' }, { actions: 'undo', target: 'open' }],
        TICK: [{ guard: 'fullNow', actions: 'prune' }, { actions: 'prune', target: 'open' }],
        CONFIGURE: [{ guard: 'fullReconfigured', actions: 'configure' }, { actions: 'configure', target: 'open' }],
      },
    },
  },
});
