// Rate-limit bucket (SPEC §2.1, §4.1): an exact sliding window. Never more than `limit` admitted calls in
// any interval of `windowMs`; a refused call consumes nothing; `retryAfterMs` is the time until the oldest
// counted call leaves the window. Windows are half-open: a call at t and one at t + windowMs never count
// together. Pure: time comes in events (`at`), and the one deadline — when the
// oldest stamp leaves a full window — is in context, so a host can re-arm it after a restart.
import { setup, assign, assertEvent } from 'xstate';

export interface BucketInput {
  limit: number;
  windowMs: number;
}

export interface BucketContext extends BucketInput {
  /**
   * Times of the admitted calls still inside the window, oldest first, in chunks of at most CHUNK. An
   * event copies the list of chunks and one chunk, not every stamp: a day window of a large limit holds
   * tens of thousands, and copying them all on each call cost more than the rest of the admission.
   */
  chunks: number[][];
  /** Outcome of the last ADMIT: what the host returns to the caller (with the stamp an UNDO gives back). */
  last: { admitted: true; stamp: number } | { admitted: false; retryAfterMs: number } | null;
  /** When the window next frees a slot while full; null while open. */
  deadline: number | null;
}

export type BucketEvent =
  | { type: 'ADMIT'; at: number }
  | { type: 'UNDO'; at: number; stamp: number }
  | { type: 'TICK'; at: number }
  /** The configured limit or window changed (config is read at start). */
  | { type: 'CONFIGURE'; at: number; input: BucketInput };

const CHUNK = 64;

/** All stamps in the window, oldest first (for tests and tools; the machine never flattens them). */
export const stampsOf = (ctx: Pick<BucketContext, 'chunks'>): number[] => ctx.chunks.flat();

const countOf = (chunks: number[][]) => chunks.reduce((n, c) => n + c.length, 0);

/** The stamp at index i (0 = oldest). */
function stampAt(chunks: number[][], i: number): number {
  for (const c of chunks) {
    if (i < c.length) return c[i]!;
    i -= c.length;
  }
  throw new RangeError('no such stamp');
}

/** The chunks without the stamps that left the window by `at` (the same array when none did). */
function live(ctx: Pick<BucketContext, 'chunks' | 'windowMs'>, at: number): number[][] {
  const from = at - ctx.windowMs;
  let i = 0;
  while (i < ctx.chunks.length && ctx.chunks[i]![ctx.chunks[i]!.length - 1]! <= from) i++;
  const first = ctx.chunks[i];
  if (!first || first[0]! > from) return i === 0 ? ctx.chunks : ctx.chunks.slice(i);
  let j = 0;
  while (first[j]! <= from) j++;
  return [first.slice(j), ...ctx.chunks.slice(i + 1)];
}

function appended(chunks: number[][], at: number): number[][] {
  const tail = chunks[chunks.length - 1];
  return tail && tail.length < CHUNK ? [...chunks.slice(0, -1), [...tail, at]] : [...chunks, [at]];
}

/** The chunks without the newest occurrence of `stamp` (the same array when it is not there). */
function without(chunks: number[][], stamp: number): number[][] {
  for (let i = chunks.length - 1; i >= 0; i--) {
    const at = chunks[i]!.lastIndexOf(stamp);
    if (at < 0) continue;
    const rest = [...chunks[i]!.slice(0, at), ...chunks[i]!.slice(at + 1)];
    return [...chunks.slice(0, i), ...(rest.length ? [rest] : []), ...chunks.slice(i + 1)];
  }
  return chunks;
}

const newest = (chunks: number[][]) => chunks[chunks.length - 1]?.[chunks[chunks.length - 1]!.length - 1];

function deadlineOf(ctx: BucketInput, chunks: number[][]): number | null {
  const n = countOf(chunks);
  return n >= ctx.limit ? stampAt(chunks, n - ctx.limit) + ctx.windowMs : null;
}

/**
 * The form `anet replay --verify` compares: the stamps as one list and `last` without its stamp. An
 * upgraded snapshot cuts its chunks where the old list happened to fall, and keeps no stamp in `last`,
 * so its chunks need not match the ones a replay from the journal builds, for the same window.
 */
export function comparableBucketContext(context: unknown): unknown {
  const { chunks, last, ...rest } = upgradeBucketContext(context) as BucketContext;
  return { ...rest, stamps: chunks.flat(), last: last?.admitted ? { admitted: true } : last };
}

/**
 * A snapshot stored before the stamps were chunked holds them as one array (`stamps`): the host's
 * restore hook turns it into chunks, so data dirs written by earlier versions keep their windows.
 */
export function upgradeBucketContext(context: unknown): unknown {
  const { stamps, ...rest } = context as { stamps?: number[] };
  if (!Array.isArray(stamps)) return context;
  const chunks: number[][] = [];
  for (let i = 0; i < stamps.length; i += CHUNK) chunks.push(stamps.slice(i, i + CHUNK));
  return { ...rest, chunks };
}

export const bucketMachine = setup({
  types: {
    context: {} as BucketContext,
    events: {} as BucketEvent,
    input: {} as BucketInput,
  },
  guards: {
    hasRoom: ({ context, event }) => countOf(live(context, event.at)) < context.limit,
    /** Room for this call, and the window is full once it is counted. */
    fillsUp: ({ context, event }) => countOf(live(context, event.at)) === context.limit - 1,
    fullNow: ({ context, event }) => countOf(live(context, event.at)) >= context.limit,
    fullReconfigured: ({ context, event }) => {
      assertEvent(event, 'CONFIGURE');
      const next = { ...context, ...event.input };
      return countOf(live(next, event.at)) >= next.limit;
    },
    fullAfterUndo: ({ context, event }) => {
      assertEvent(event, 'UNDO');
      const chunks = live(context, event.at);
      return countOf(event.stamp > event.at - context.windowMs ? without(chunks, event.stamp) : chunks) >= context.limit;
    },
  },
  actions: {
    admit: assign(({ context, event }) => {
      // A clock that stepped back must not unsort the window: count the call at the latest stamp.
      const at = Math.max(event.at, newest(context.chunks) ?? -Infinity);
      const chunks = appended(live(context, at), at);
      return { chunks, last: { admitted: true, stamp: at } as const, deadline: deadlineOf(context, chunks) };
    }),
    refuse: assign(({ context, event }) => {
      const chunks = live(context, event.at);
      const retryAfterMs = stampAt(chunks, countOf(chunks) - context.limit) + context.windowMs - event.at;
      return { chunks, last: { admitted: false, retryAfterMs } as const, deadline: deadlineOf(context, chunks) };
    }),
    undo: assign(({ context, event }) => {
      assertEvent(event, 'UNDO');
      const kept = live({ ...context, chunks: without(context.chunks, event.stamp) }, event.at);
      return { chunks: kept, deadline: deadlineOf(context, kept) };
    }),
    configure: assign(({ context, event }) => {
      assertEvent(event, 'CONFIGURE');
      const { limit, windowMs } = event.input;
      const next = { ...context, limit, windowMs };
      const chunks = live(next, event.at);
      return { limit, windowMs, chunks, deadline: deadlineOf(next, chunks) };
    }),
    prune: assign(({ context, event }) => {
      const chunks = live(context, event.at);
      return { chunks, deadline: deadlineOf(context, chunks) };
    }),
  },
}).createMachine({
  id: 'bucket',
  context: ({ input }) => ({ ...input, chunks: [], last: null, deadline: null }),
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
        ADMIT: [{ guard: 'fillsUp', actions: 'admit' }, { guard: 'hasRoom', actions: 'admit', target: 'open' }, { actions: 'refuse' }],
        UNDO: [
          { guard: 'fullAfterUndo', actions: 'undo' },
          { actions: 'undo', target: 'open' },
        ],
        TICK: [
          { guard: 'fullNow', actions: 'prune' },
          { actions: 'prune', target: 'open' },
        ],
        CONFIGURE: [
          { guard: 'fullReconfigured', actions: 'configure' },
          { actions: 'configure', target: 'open' },
        ],
      },
    },
  },
});
