// SPEC §2.1 and §4.1: the rate-limit bucket (exact sliding window, exact retry_after_ms, refused calls
// consume nothing) and the in-flight counter, as pure machines.
import test from 'ava';
import fc from 'fast-check';
import { transition, initialTransition, type AnyMachineSnapshot, type AnyStateMachine } from 'xstate';
import { bucketMachine, stampsOf, type BucketContext } from '../machines/bucket.js';
import { inflightMachine, type InflightContext } from '../machines/inflight.js';
import { step, initial } from '../src/runtime/pure.js';
import { cardFetchMachine } from '../machines/card-fetch.js';
import { isDeepStrictEqual } from 'node:util';
import { restoreSnapshot } from '../src/runtime/host.js';
import { KINDS } from '../src/runtime/kinds.js';

const admit = (s: AnyMachineSnapshot, at: number) => transition(bucketMachine, s as never, { type: 'ADMIT', at })[0];
const last = (s: AnyMachineSnapshot) => (s.context as BucketContext).last!;

/** Steps a machine both through xstate's transition() and the host's fast step; false once they differ. */
function bothPaths(machine: AnyStateMachine, input: unknown) {
  let a: AnyMachineSnapshot = initialTransition(machine, input)[0];
  let b = initial(machine, input);
  return (event: object): boolean => {
    a = transition(machine, a as never, event as never)[0];
    b = step(machine, b, event as never);
    return isDeepStrictEqual(machine.getPersistedSnapshot(a), machine.getPersistedSnapshot(b));
  };
}

test('SPEC §2.1: never more than N admitted in any window; a refusal happens only when N are inside it', (t) => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 5 }),
      fc.integer({ min: 10, max: 1000 }),
      fc.array(fc.integer({ min: 0, max: 400 }), { minLength: 1, maxLength: 80 }),
      (limit, windowMs, gaps) => {
        let s: AnyMachineSnapshot = initialTransition(bucketMachine, { limit, windowMs })[0];
        let at = 0;
        const admitted: number[] = [];
        for (const gap of gaps) {
          at += gap;
          const inWindow = admitted.filter((x) => x > at - windowMs).length;
          const before = s.context as BucketContext;
          s = admit(s, at);
          const r = last(s);
          if (r.admitted) {
            if (inWindow >= limit) return false;
            admitted.push(at);
          } else {
            if (inWindow < limit) return false;
            // A refused call consumes nothing.
            if (stampsOf(s.context as BucketContext).length !== stampsOf(before).filter((x) => x > at - windowMs).length) return false;
            // retry_after_ms is exact: one ms earlier is still refused, at that moment it is admitted.
            if (r.retryAfterMs > 1 && last(admit(s, at + r.retryAfterMs - 1)).admitted) return false;
            if (!last(admit(s, at + r.retryAfterMs)).admitted) return false;
          }
          // Every half-open interval [x, x + windowMs) holds at most `limit` admitted calls.
          for (const x of admitted) if (admitted.filter((y) => y >= x && y < x + windowMs).length > limit) return false;
          const full = admitted.filter((x) => x > at - windowMs).length >= limit;
          if (s.value !== (full ? 'limited' : 'open')) return false;
        }
        return true;
      },
    ),
    { numRuns: 300 },
  );
  t.pass();
});

/** The window as one flat array of stamps: the plain model the chunked machine must agree with. */
class FlatWindow {
  stamps: number[] = [];
  constructor(
    public limit: number,
    public windowMs: number,
  ) {}
  prune(at: number) {
    this.stamps = this.stamps.filter((x) => x > at - this.windowMs);
  }
  admit(at: number): { admitted: true; stamp: number } | { admitted: false; retryAfterMs: number } {
    this.prune(at);
    if (this.stamps.length >= this.limit)
      return { admitted: false, retryAfterMs: this.stamps[this.stamps.length - this.limit]! + this.windowMs - at };
    // A clock that stepped back counts the call at the newest stamp.
    const stamp = Math.max(at, this.stamps[this.stamps.length - 1] ?? -Infinity);
    this.prune(stamp);
    this.stamps.push(stamp);
    return { admitted: true, stamp };
  }
  undo(at: number, stamp: number) {
    const i = this.stamps.lastIndexOf(stamp);
    if (i >= 0) this.stamps.splice(i, 1);
    this.prune(at);
  }
  configure(at: number, limit: number, windowMs: number) {
    this.limit = limit;
    this.windowMs = windowMs;
    this.prune(at);
  }
  deadline(): number | null {
    return this.stamps.length >= this.limit ? this.stamps[this.stamps.length - this.limit]! + this.windowMs : null;
  }
}

test('SPEC §2.1: a window of hundreds of stamps, over several chunks, answers exactly as one flat list would', (t) => {
  fc.assert(
    fc.property(
      fc.integer({ min: 60, max: 300 }),
      // Gaps below 0 are a clock that stepped back; ops: admit, undo a counted stamp, undo any stamp
      // (absent, expired or duplicated), tick, reconfigure.
      fc.array(
        fc.record({
          gap: fc.integer({ min: -6, max: 12 }),
          op: fc.integer({ min: 0, max: 19 }),
          back: fc.nat(80),
          limit: fc.integer({ min: 40, max: 300 }),
          windowMs: fc.constantFrom(300, 1_000, 2_000, 3_000),
        }),
        { minLength: 200, maxLength: 900 },
      ),
      (limit, steps) => {
        const model = new FlatWindow(limit, 2_000);
        let s: AnyMachineSnapshot = initialTransition(bucketMachine, { limit, windowMs: 2_000 })[0];
        let at = 10_000;
        const send = (event: object) => (s = transition(bucketMachine, s as never, event as never)[0]);
        for (const step of steps) {
          at += step.gap;
          // With the clock behind the newest stamp, a call that fills the window is counted at that stamp,
          // where an older one may have left it: the state can say `limited` one event early (as the flat
          // version did). Every later event derives the state from the window again.
          const behind = at < (model.stamps[model.stamps.length - 1] ?? -Infinity);
          if (step.op < 14) {
            send({ type: 'ADMIT', at });
            if (!isDeepStrictEqual(last(s), model.admit(at))) return false;
          } else if (step.op < 17) {
            const stamp = step.op < 16 ? (model.stamps[Math.max(0, model.stamps.length - 1 - step.back)] ?? at) : at - step.back * 40;
            send({ type: 'UNDO', at, stamp });
            model.undo(at, stamp);
          } else if (step.op < 19) {
            send({ type: 'TICK', at });
            model.prune(at);
          } else {
            send({ type: 'CONFIGURE', at, input: { limit: step.limit, windowMs: step.windowMs } });
            model.configure(at, step.limit, step.windowMs);
          }
          const ctx = s.context as BucketContext;
          if (!isDeepStrictEqual(stampsOf(ctx), model.stamps) || ctx.deadline !== model.deadline()) return false;
          if (ctx.chunks.some((c) => c.length === 0 || c.length > 64)) return false;
          if (!behind && s.value !== (model.stamps.length >= model.limit ? 'limited' : 'open')) return false;
        }
        return true;
      },
    ),
    { numRuns: 60 },
  );
  t.pass();
});

test('SPEC §2.1: a bucket snapshot stored with a flat stamp list (before chunks) restores with its window', (t) => {
  const old = {
    status: 'active',
    value: 'limited',
    context: { limit: 100, windowMs: 1000, stamps: Array.from({ length: 100 }, (_, i) => i), last: { admitted: true }, deadline: 1000 },
  };
  const s = restoreSnapshot(KINDS.bucket!, old);
  t.deepEqual(stampsOf(s.context as BucketContext), old.context.stamps);
  t.false('stamps' in (s.context as object));
  t.like(last(admit(s, 999)), { admitted: false, retryAfterMs: 1 }, 'the oldest stored stamp still counts');
  t.like(last(admit(s, 1000)), { admitted: true, stamp: 1000 });
});

test('SPEC §2.1: the bucket keeps its deadline in context and opens on the TICK at that time', (t) => {
  let s: AnyMachineSnapshot = initialTransition(bucketMachine, { limit: 2, windowMs: 1000 })[0];
  s = admit(s, 0);
  t.is(s.value, 'open');
  t.is((s.context as BucketContext).deadline, null);
  s = admit(s, 10);
  t.is(s.value, 'limited');
  t.is((s.context as BucketContext).deadline, 1000);
  t.is(transition(bucketMachine, s as never, { type: 'TICK', at: 999 })[0].value, 'limited');
  const opened = transition(bucketMachine, s as never, { type: 'TICK', at: 1000 })[0];
  t.is(opened.value, 'open');
  t.deepEqual(stampsOf(opened.context as BucketContext), [10]);
});

test('SPEC §4.1: UNDO gives back an admitted slot (a later window refused the same call)', (t) => {
  let s: AnyMachineSnapshot = initialTransition(bucketMachine, { limit: 1, windowMs: 1000 })[0];
  s = admit(s, 5);
  t.is(s.value, 'limited');
  s = transition(bucketMachine, s as never, { type: 'UNDO', at: 6, stamp: 5 })[0];
  t.is(s.value, 'open');
  t.true(last(admit(s, 7)).admitted);
});

test('SPEC §2.1: the in-flight counter refuses at max, frees on finish, and ignores unknown finishes', (t) => {
  const send = (s: AnyMachineSnapshot, e: object) => transition(inflightMachine, s as never, e as never)[0];
  let s: AnyMachineSnapshot = initialTransition(inflightMachine, { max: 2 })[0];
  t.is(s.value, 'idle');
  s = send(s, { type: 'START', at: 1, id: 'a' });
  t.is(s.value, 'busy');
  s = send(s, { type: 'START', at: 2, id: 'b' });
  t.is(s.value, 'full');
  s = send(s, { type: 'START', at: 3, id: 'c' });
  t.deepEqual((s.context as InflightContext).last, { started: false, id: 'c', full: 'max' });
  t.deepEqual(Object.keys((s.context as InflightContext).running), ['a', 'b']);
  s = send(s, { type: 'FINISH', at: 4, id: 'zzz' });
  t.is(s.value, 'full');
  s = send(s, { type: 'FINISH', at: 5, id: 'a' });
  t.is(s.value, 'busy');
  s = send(s, { type: 'START', at: 6, id: 'b' });
  t.deepEqual((s.context as InflightContext).last, { started: false, id: 'b' }, 'a running id cannot start twice');
  s = send(s, { type: 'CLEAR', at: 7 });
  t.is(s.value, 'idle');
});

test("SPEC §4.1: one in-flight machine checks the whole count first, then the caller's, in one step", (t) => {
  const send = (s: AnyMachineSnapshot, e: object) => transition(inflightMachine, s as never, e as never)[0];
  let s: AnyMachineSnapshot = initialTransition(inflightMachine, { max: 3, perCaller: 1 })[0];
  s = send(s, { type: 'START', at: 1, id: 'a1', caller: 'A' });
  s = send(s, { type: 'START', at: 2, id: 'a2', caller: 'A' });
  t.deepEqual((s.context as InflightContext).last, { started: false, id: 'a2', full: 'caller' });
  s = send(s, { type: 'START', at: 3, id: 'b1', caller: 'B' });
  s = send(s, { type: 'START', at: 4, id: 'c1', caller: 'C' });
  s = send(s, { type: 'START', at: 5, id: 'a3', caller: 'A' });
  t.deepEqual((s.context as InflightContext).last, { started: false, id: 'a3', full: 'max' }, 'both full: the whole count is the reason');
  s = send(s, { type: 'FINISH', at: 6, id: 'a1' });
  s = send(s, { type: 'START', at: 7, id: 'a4', caller: 'A' });
  t.deepEqual((s.context as InflightContext).last, { started: true, id: 'a4' });
  t.deepEqual((s.context as InflightContext).callers, { b1: 'B', c1: 'C', a4: 'A' });
});

test("SPEC §14: the host's fast pure step gives exactly the snapshots of xstate transition()", (t) => {
  fc.assert(
    fc.property(
      fc.array(
        fc.oneof(
          fc.record({ type: fc.constant('ADMIT' as const), gap: fc.nat(500) }),
          fc.record({ type: fc.constant('TICK' as const), gap: fc.nat(500) }),
        ),
        { maxLength: 40 },
      ),
      (events) => {
        const bucket = bothPaths(bucketMachine, { limit: 3, windowMs: 700 });
        let at = 0;
        for (const e of events) {
          at += e.gap;
          if (!bucket({ type: e.type, at })) return false;
        }
        const inflight = bothPaths(inflightMachine, { max: 2 });
        for (const [i, e] of events.entries()) {
          if (!inflight({ type: e.type === 'ADMIT' ? 'START' : 'FINISH', at: i, id: `c${e.gap % 3}` })) return false;
        }
        return true;
      },
    ),
    { numRuns: 200 },
  );
  t.pass();
});

test('SPEC §14: the fast pure step matches xstate transition() for the card-fetch machine too', (t) => {
  fc.assert(
    fc.property(
      fc.array(fc.record({ kind: fc.constantFrom('NEED', 'REPLY_OK', 'REPLY_NC', 'REPLY_BAD', 'SEQ', 'TICK'), gap: fc.nat(40_000) }), {
        maxLength: 30,
      }),
      (events) => {
        const fetch = bothPaths(cardFetchMachine, undefined);
        let at = 0;
        let n = 0;
        for (const e of events) {
          at += e.gap;
          const rid = `r${n}`;
          const ev =
            e.kind === 'NEED'
              ? { type: 'NEED', at, publicSeq: String(1 + (n % 3)), requestId: `r${++n}` }
              : e.kind === 'SEQ'
                ? { type: 'PUBLIC_SEQ', at, publicSeq: String(1 + (n % 4)) }
                : e.kind === 'TICK'
                  ? { type: 'TICK', at }
                  : {
                      type: 'REPLY',
                      at,
                      requestId: rid,
                      result: e.kind === 'REPLY_OK' ? 'ok' : e.kind === 'REPLY_NC' ? 'not_configured' : 'invalid',
                      wire: '{}',
                    };
          if (!fetch(ev)) return false;
        }
        return true;
      },
    ),
    { numRuns: 200 },
  );
  t.pass();
});
