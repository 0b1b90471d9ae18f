// SPEC §14: how a machine is written does not change what the runtime computes. A machine in the fast
// path's subset (machines/README.md) with guards and actions in object form with `params` takes the fast
// path; one outside it (an entry action) takes xstate's, in the host and in replay alike; both give
// exactly the snapshots of xstate's own transition(), and the host's journal replays and verifies.
import test from 'ava';
import fc from 'fast-check';
import { isDeepStrictEqual } from 'node:util';
import { assign, setup, transition, initialTransition, type AnyMachineSnapshot, type AnyStateMachine } from 'xstate';
import { step, initial } from '../../src/runtime/pure.js';
import { isFlat, flatStep } from '../../src/runtime/flat-step.js';
import { Rebuild } from '../../src/runtime/rebuild.js';
import { ActorHost } from '../../src/runtime/host.js';
import { ManualClock } from '../../src/runtime/clock.js';
import { verify, replay } from '../../src/runtime/replay.js';
import type { ActorKind } from '../../src/runtime/kinds.js';
import { Store } from '../../store/db.js';
import { tempDir } from '../helpers/tmp.js';

type Ev = { type: 'ADD'; at: number; by: number } | { type: 'RESET'; at: number } | { type: 'GO'; at: number };

/** Object-form guards and actions with params: a value, and a function of context and event. */
const withParams = setup({
  types: {} as { context: { n: number; log: string[] }; events: Ev },
  guards: { below: ({ context }, p: { max: number }) => context.n < p.max },
  actions: {
    add: assign(({ context }, p: { by: number }) => ({ n: context.n + p.by })),
    note: assign({ log: ({ context }, p: { text: string }) => [...context.log, p.text] }),
  },
}).createMachine({
  context: { n: 0, log: [] },
  initial: 'counting',
  states: {
    counting: {
      on: {
        ADD: [
          {
            guard: { type: 'below', params: { max: 5 } },
            actions: [
              { type: 'add', params: ({ event }) => ({ by: (event as { by: number }).by }) },
              { type: 'note', params: { text: 'added' } },
            ],
          },
          { target: 'full', actions: { type: 'note', params: ({ context }) => ({ text: `full at ${context.n}` }) } },
        ],
      },
    },
    full: { on: { RESET: { target: 'counting', actions: assign({ n: 0 }) } } },
  },
});

/** An entry action: outside the fast path's subset. */
const withEntry = setup({ types: {} as { context: { entered: number; last: number }; events: Ev } }).createMachine({
  context: { entered: 0, last: 0 },
  initial: 'a',
  states: {
    a: {
      entry: assign({ entered: ({ context }) => context.entered + 1 }),
      on: { GO: 'b', ADD: { actions: assign({ last: ({ event }) => event.at }) } },
    },
    b: { on: { GO: 'a' } },
  },
});

const KINDS: Record<string, ActorKind> = {
  params: { machine: withParams, version: 1, deadline: () => null },
  entry: { machine: withEntry, version: 1, deadline: () => null },
};

const event = fc.oneof(
  fc.record({ type: fc.constant('ADD' as const), by: fc.integer({ min: 0, max: 3 }) }),
  fc.record({ type: fc.constant('RESET' as const) }),
  fc.record({ type: fc.constant('GO' as const) }),
);

/** The pure step and replay's rebuild against xstate's transition(), over random event sequences. */
function equalsXstate(machine: AnyStateMachine): boolean {
  let ok = true;
  fc.assert(
    fc.property(fc.array(event, { maxLength: 40 }), (events) => {
      let x: AnyMachineSnapshot = initialTransition(machine, undefined)[0];
      let s = initial(machine, undefined);
      const rebuild = new Rebuild({ k: { machine, version: 1, deadline: () => null } });
      let seq = 0;
      for (const [i, e] of events.entries()) {
        const ev = { ...e, at: 1000 + i } as Ev;
        x = transition(machine, x as never, ev as never)[0];
        // A flat machine's steps are the fast path's own, never left to xstate (a throwing step would be).
        if (isFlat(machine) && s.status === 'active' && flatStep(machine, s, ev, { self: undefined, system: undefined }) === undefined)
          ok = false;
        s = step(machine, s, ev);
        rebuild.apply({ seq: ++seq, actor: 'a', kind: 'k', event: ev });
        if (!isDeepStrictEqual(x, s) || !isDeepStrictEqual(x, rebuild.snapshot())) ok = false;
        if (!ok) return false;
      }
      return true;
    }),
    { numRuns: 200 },
  );
  return ok;
}

test('SPEC §14: object-form guards and actions with params take the fast path and equal xstate transition()', (t) => {
  t.true(isFlat(withParams));
  t.true(equalsXstate(withParams));
});

test("SPEC §14: a machine outside the fast path's subset (an entry action) takes xstate's path and equals xstate transition()", (t) => {
  t.false(isFlat(withEntry));
  t.true(equalsXstate(withEntry));
});

test('SPEC §14: the host runs machines outside the subset too, and replay --verify rebuilds them exactly', async (t) => {
  const dir = await tempDir(t);
  const clock = new ManualClock(1000);
  const store = await Store.open(dir);
  const host = await ActorHost.start(store, { clock, kinds: KINDS, checkpointEvery: 7 });
  for (let i = 0; i < 30; i++) {
    await host.send(`p${i % 3}`, 'params', undefined, i % 8 === 7 ? { type: 'RESET' } : { type: 'ADD', by: i % 3 });
    await host.send(`e${i % 2}`, 'entry', undefined, i % 3 ? { type: 'GO' } : { type: 'ADD' });
    await clock.advance(10);
  }
  const e0 = await host.state('e0');
  await host.close();
  const r = await verify(store, undefined, KINDS);
  t.like(r, { snapshots: 5, checked: 5, differences: [], damage: null });
  const values: unknown[] = [];
  t.is(await replay(store, { actor: 'e0' }, (s) => values.push(s.after), KINDS), 15);
  t.is(values.at(-1), e0!.value);
  await store.close();
});

test('SPEC §14: a context the fast path assigns stays an object of fixed shape, not a hash table (a call: 24 fields, two steps)', async (t) => {
  const { callMachine } = await import('../../machines/call.js');
  const { setFlagsFromString } = await import('node:v8');
  setFlagsFromString('--allow-natives-syntax');
  // Compiled once the flag is on: V8's own test of whether an object's properties are fast.
  const fast = new Function('o', 'return %HasFastProperties(o)') as (o: unknown) => boolean;
  let s = initial(callMachine, undefined);
  s = step(callMachine, s, {
    type: 'RECEIVED',
    at: 1,
    nonce: 'n',
    task: 't',
    caller: 'c',
    capability: 'x.y',
    argsBytes: 1,
    argsHash: 'h',
  } as never);
  t.true(fast(s.context), 'after RECEIVED');
  s = step(callMachine, s, { type: 'COMPLETED', at: 2, resultBytes: 1, resultHash: 'r', receipt: 'rc' } as never);
  t.is(s.value, 'completed');
  t.true(fast(s.context), 'after COMPLETED');
});
