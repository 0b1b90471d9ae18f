// The host's pure step (src/runtime/pure.ts, with its fast path for flat machines) against xstate's own
// transition(), for every machine the runtime hosts (src/runtime/kinds.ts): random event sequences, some
// of them ignored by the machine, some on snapshots restored from their persisted form; after each
// event the two snapshots must be deeply equal (every field, not only the persisted ones), and the step
// must return the same object exactly when xstate does (an ignored event). Replay's rebuild (lean actors,
// initial states computed directly) is driven with the same events as journal entries and must give the
// same snapshots and state values as xstate too; the journal decoder (journal-decode.ts) must decode as
// the codec does. A kind whose machine is outside the fast path's subset
// (machines/README.md) is checked all the same: its steps are xstate's, and the line says so.
// `node --import=tsx bench/step-equivalence.ts [runs]` (or the built dist/bench/step-equivalence.js) —
// exits 1 on the first difference, with the sequence. test/step-equivalence.test.ts runs it on source.
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { transition, initialTransition, type AnyMachineSnapshot, type AnyStateMachine } from 'xstate';
import { KINDS } from '../src/runtime/kinds.js';
import { step, initial, scopeOf } from '../src/runtime/pure.js';
import { isFlat, flatStep, leanInitial, materialize } from '../src/runtime/flat-step.js';
import { restoreSnapshot } from '../src/runtime/host.js';
import { Rebuild } from '../src/runtime/rebuild.js';
import { decodeValue, decodeStats } from '../src/runtime/journal-decode.js';
import { pack, unpack } from '../store/codec.js';

type Ev = { type: string; [k: string]: unknown };
/** An event from a few draws: `pick` chooses among alternatives, `n` gives small numbers. */
type Make = (at: number, pick: (k: number) => number, n: (max: number) => number) => Ev;

const ids = ['a', 'b', 'c'];
const amounts = ['0', '1', '5', '9223372036854775807', '4611686018427387904'];

const bucket: Make = (at, pick, n) => {
  switch (pick(5)) {
    case 0:
    case 1:
      return { type: 'ADMIT', at };
    case 2:
      return { type: 'UNDO', at, stamp: at - n(3) * 100 };
    case 3:
      return { type: 'TICK', at };
    default:
      return { type: 'CONFIGURE', at, input: { limit: 1 + n(4), windowMs: 200 + n(4) * 300 } };
  }
};

const events: Record<string, { input: (n: (max: number) => number) => unknown; make: Make; gap?: (g: number) => number }> = {
  bucket: { input: (n) => ({ limit: 1 + n(4), windowMs: 300 + n(3) * 400 }), make: bucket },
  'reply-limiter': { input: () => ({ limit: 6, windowMs: 60_000 }), make: bucket, gap: (g) => g % 25_000 },
  inflight: {
    input: (n) => ({ max: 1 + n(3), ...(n(3) ? { perCaller: 1 + n(2) } : {}) }),
    make: (at, pick, n) => {
      switch (pick(5)) {
        case 0:
          return { type: 'START', at, id: `c${n(4)}`, ...(n(2) ? { caller: ids[n(3)] } : {}) };
        case 1:
          return { type: 'FINISH', at, id: `c${n(4)}` };
        case 2:
          return { type: 'CLEAR', at };
        case 3:
          return { type: 'CONFIGURE', at, input: { max: 1 + n(3), ...(n(2) ? { perCaller: 1 + n(2) } : {}) } };
        default:
          return { type: 'NOPE', at };
      }
    },
  },
  call: {
    input: () => undefined,
    make: (at, pick, n) => {
      const reason = ['timeout', 'outcome_unknown', 'service_error'][n(3)]!;
      switch (pick(14)) {
        case 0:
          return { type: 'RECEIVED', at, nonce: `n${n(9)}`, task: 't', caller: 'c', capability: 'cap', argsBytes: n(99), argsHash: 'h' };
        case 1:
          return {
            type: 'REFUSED',
            at,
            reason: 'rate_limited',
            ...(n(2) ? { retryAfterMs: n(999) } : {}),
            ...(n(2) ? { detail: 'd' } : {}),
          };
        case 2:
          return { type: 'STARTED', at };
        case 3:
          return { type: 'COMPLETED', at, resultBytes: n(99), resultHash: 'r', receipt: n(2) ? 'bafy' : '' };
        case 4:
          return { type: 'FAILED', at, reason, ...(n(2) ? { detail: 'd' } : {}), ...(n(2) ? { retryAfterMs: 5 } : {}) };
        case 5:
          return { type: 'SERVICE_REJECTED', at, message: 'no' };
        case 6:
          return { type: 'INTERRUPTED', at };
        case 7:
          return { type: 'QUOTED', at, quoteId: 'q', amount: amounts[n(5)], expiresAt: at + n(3) * 500 };
        case 8:
          return { type: 'PAY', at, payNonce: `p${n(9)}` };
        case 9:
          return { type: 'HELD', at, tx: 'tx_h' };
        case 10:
          return { type: 'CANCELED', at, reason: 'canceled' };
        case 11:
          return {
            type: 'SETTLED',
            at,
            tx: 'tx_s',
            settled: ['captured', 'released', 'void', 'expired'][n(4)],
            ...(n(2) ? { receipt: 'bafz' } : {}),
          };
        case 12:
          return { type: 'TICK', at };
        default:
          return { type: 'NOPE', at };
      }
    },
  },
  payment: {
    input: () => undefined,
    make: (at, pick, n) => {
      switch (pick(7)) {
        case 0:
          return {
            type: 'QUOTE',
            at,
            task: 't',
            provider: 'p',
            skillId: 's',
            quoteId: 'q',
            amount: amounts[n(5)],
            expiresAt: at + n(3) * 500,
          };
        case 1:
          return { type: 'AUTHORIZE', at, nonce: `n${n(9)}`, validBefore: at + 1000, auto: n(2) === 1 };
        case 2:
          return { type: 'REJECT', at };
        case 3:
          return { type: 'SETTLED', at, captured: n(2) === 1, hubTx: n(2) ? 'tx' : '' };
        case 4:
          return { type: 'TICK', at };
        case 5:
          return { type: 'ABANDON', at: at + n(2) * 25 * 3_600_000 };
        default:
          return { type: 'NOPE', at };
      }
    },
  },
  spend: {
    input: (n) => ({ windowMs: 500 + n(3) * 500 }),
    make: (at, pick, n) => {
      switch (pick(3)) {
        case 0:
        case 1:
          return { type: 'SPEND', at, id: `s${n(5)}`, amount: amounts[n(5)], limit: amounts[n(5)] };
        default:
          return { type: 'UNDO', at, id: `s${n(5)}` };
      }
    },
  },
  'card-fetch': {
    input: () => undefined,
    // Past the 10 s wait, the 60 s guard and, now and then, the 24 h cache.
    gap: (g) => (g % 7 === 0 ? g * 100 : g % 70_000),
    make: (at, pick, n) => {
      switch (pick(5)) {
        case 0:
          return { type: 'NEED', at, publicSeq: String(1 + n(3)), requestId: `r${n(3)}` };
        case 1:
          return {
            type: 'REPLY',
            at,
            requestId: `r${n(3)}`,
            result: ['ok', 'not_configured', 'invalid', 'unreachable'][n(4)],
            ...(n(2) ? { wire: '{}' } : {}),
          };
        case 2:
          return { type: 'PUBLIC_SEQ', at, publicSeq: String(1 + n(4)) };
        case 3:
          return { type: 'TICK', at };
        default:
          return { type: 'NOPE', at };
      }
    },
  },
  // Both versions (the frozen one replays older journals) take the same events.
  'card-fetch-v2': undefined as never,
};
events['card-fetch-v2'] = events['card-fetch']!;

let last: unknown;
let fast = 0;
const seen = new Set<string>();
let slow = 0;

function differing(a: AnyMachineSnapshot, b: AnyMachineSnapshot): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const x = a as unknown as Record<string, unknown>;
  const y = b as unknown as Record<string, unknown>;
  for (const k of new Set([...Object.keys(x), ...Object.keys(y)])) if (!isDeepStrictEqual(x[k], y[k])) out[k] = [x[k], y[k]];
  return out;
}

function check(kind: string, machine: AnyStateMachine, runs: number): void {
  const spec = events[kind];
  if (!spec) throw new Error(`no event generator for kind "${kind}": add one`);
  // Replay computes initial states of flat machines directly (on a template snapshot from another input).
  const template = initial(
    machine,
    spec.input(() => 0),
  );
  for (let i = 0; i < 50 && isFlat(machine); i++) {
    const input = spec.input((max) => (i * 7 + max) % max);
    const lean = leanInitial(machine, template, input, scopeOf(machine, input));
    if (!lean) throw new Error(`kind "${kind}": replay's initial state is xstate's`);
    if (!isDeepStrictEqual(materialize(lean, false), initialTransition(machine, input)[0]))
      throw new Error(`kind "${kind}": initial state differs`);
  }
  fc.assert(
    fc.property(
      fc.array(fc.nat(1_000_000), { minLength: 3, maxLength: 3 }),
      fc.array(
        fc.record({ gap: fc.nat(1_000_000), draws: fc.array(fc.nat(1_000_000), { minLength: 8, maxLength: 8 }), restore: fc.nat(9) }),
        { minLength: 1, maxLength: 60, size: 'max' },
      ),
      (inputDraws, steps) => {
        let k = 0;
        const input = spec.input((max) => inputDraws[k++ % inputDraws.length]! % max);
        const rebuild = new Rebuild();
        let c: AnyMachineSnapshot = initialTransition(machine, input)[0];
        let seq = 0;
        let a: AnyMachineSnapshot = initialTransition(machine, input)[0];
        let b = initial(machine, input);
        if (!isDeepStrictEqual(a, b)) {
          last = { kind, event: 'initial', differs: differing(a, b) };
          return false;
        }
        let at = 1_000;
        for (const s of steps) {
          at += spec.gap ? spec.gap(s.gap) : s.gap % 400;
          let d = 0;
          const draw = (k: number) => s.draws[d++ % s.draws.length]! % k;
          const event = spec.make(at, draw, draw);
          if (s.restore === 0) {
            // As the host rehydrates a passivated actor: both paths go on from the restored snapshot.
            const restored = restoreSnapshot(KINDS[kind]!, machine.getPersistedSnapshot(b));
            a = restored;
            b = restored;
          }
          const nextA = transition(machine, a as never, event as never)[0];
          const nextB = step(machine, b, event);
          if (b.status === 'active') flatStep(machine, b, event, { self: undefined, system: undefined }) ? fast++ : slow++;
          if (!isDeepStrictEqual(nextA, nextB) || (nextA === a) !== (nextB === b)) {
            last = { kind, event, differs: differing(nextA, nextB), sameObject: [nextA === a, nextB === b] };
            return false;
          }
          // Replay: the same event as a journal entry, against xstate's chain without restores.
          const nextC = transition(machine, c as never, event as never)[0];
          const entry = { seq: ++seq, actor: 'x', kind, ...(seq === 1 ? { input } : {}), event: event as never };
          rebuild.apply(entry);
          const rebuilt = rebuild.snapshot();
          const reported = rebuild.step(entry);
          if (
            !isDeepStrictEqual(nextC, rebuilt) ||
            !isDeepStrictEqual(nextC, reported.state) ||
            reported.before !== c.value ||
            reported.after !== nextC.value ||
            rebuild.before !== c.value ||
            rebuild.after !== nextC.value
          ) {
            last = {
              kind,
              event,
              replay: true,
              differs: differing(nextC, rebuilt),
              values: [c.value, nextC.value, rebuild.before, rebuild.after],
            };
            return false;
          }
          c = nextC;
          seen.add(`${JSON.stringify(a.value)} ${event.type} -> ${JSON.stringify(nextA.value)}${nextA === a ? ' (ignored)' : ''}`);
          a = nextA;
          b = nextB;
        }
        return true;
      },
    ),
    { numRuns: runs },
  );
}

/** Replay's journal decoder against the codec's msgpackr, on random values (and on cut buffers). */
function checkDecoder(runs: number): void {
  const key = fc.oneof(fc.string({ maxLength: 30 }), fc.constantFrom('seq', 'actor', 'kind', 'event', 'type', 'at', '__proto__', '1', ''));
  const leaf = fc.oneof(
    fc.integer(),
    fc.integer({ min: -300, max: 300 }),
    fc.double(),
    fc.constantFrom(0, -0, 2 ** 31, 2 ** 32, -(2 ** 31) - 1, 2 ** 53, 1_700_000_000_123, 63, 64, 127, 128, 255, 256, 65535, 65536),
    fc.string({ maxLength: 40 }),
    fc.string({ unit: 'grapheme', maxLength: 5 }),
    fc.boolean(),
    fc.constantFrom(null, undefined),
    fc.bigInt({ min: -(2n ** 63n), max: 2n ** 64n - 1n }),
    fc.uint8Array({ maxLength: 8 }),
  );
  const value = fc.letrec((tie) => ({
    any: fc.oneof({ depthSize: 'small' }, leaf, tie('list'), tie('object')),
    list: fc.array(tie('any'), { maxLength: 20 }),
    object: fc.dictionary(key, tie('any'), { maxKeys: 20 }),
  })).any;
  fc.assert(
    fc.property(value, fc.nat(), (v, cut) => {
      const bytes = pack(v);
      if (!isDeepStrictEqual(decodeValue(bytes), unpack(bytes))) return false;
      // A cut buffer: both throw, or both give the same.
      const short = bytes.subarray(0, cut % (bytes.length + 1));
      let a: unknown, b: unknown;
      try {
        a = decodeValue(short);
      } catch (err) {
        a = ['threw', (err as Error).message];
      }
      try {
        b = unpack(short);
      } catch (err) {
        b = ['threw', (err as Error).message];
      }
      return isDeepStrictEqual(a, b);
    }),
    { numRuns: runs },
  );
  // Journal-shaped values take the fast path (not msgpackr's).
  const before = decodeStats.others;
  for (let i = 0; i < 1000; i++) {
    const entry = {
      seq: i,
      actor: `b:${i % 7}`,
      kind: 'bucket',
      input: i % 2 ? undefined : { limit: i, windowMs: 60_000 },
      event: {
        type: 'ADMIT',
        at: 1_700_000_000_000 + i * 1.5,
        stamps: [i, -i, 0.5],
        ok: i % 3 === 0,
        none: null,
        long: 'x'.repeat(i % 300),
      },
    };
    const bytes = pack(entry);
    if (!isDeepStrictEqual(decodeValue(bytes), unpack(bytes))) throw new Error(`journal decoder: ${JSON.stringify(entry)} differs`);
  }
  if (decodeStats.others !== before) throw new Error('journal decoder: journal-shaped values were left to msgpackr');
}

const runs = Number(process.argv[2] ?? 2000);
{
  const t0 = performance.now();
  checkDecoder(runs * 5);
  const { values, others } = decodeStats;
  console.log(
    `journal decoder: ${runs * 5} random values decode as the codec decodes them (${(performance.now() - t0).toFixed(0)} ms; ${values - others} of ${values} decodes by the fast path)`,
  );
}
for (const [kind, { machine }] of Object.entries(KINDS)) {
  const t0 = performance.now();
  fast = slow = 0;
  seen.clear();
  try {
    check(kind, machine, runs);
  } catch (err) {
    console.log(`${kind}: DIFFERS`, last);
    throw err;
  }
  const path = isFlat(machine) ? 'fast path' : "xstate's path (outside the fast path's subset, machines/README.md)";
  console.log(
    `${kind}: ${runs} runs, pure step == xstate transition(), ${path} (${(performance.now() - t0).toFixed(0)} ms; ${fast} steps on active snapshots took the fast path, ${slow} xstate's; ${seen.size} distinct state/event/state moves)`,
  );
  if (process.argv.includes('--moves')) console.log([...seen].sort().join('\n'));
  // A flat machine's every step on an active snapshot takes the fast path, or the fast path is not being
  // tested here (a step that throws is xstate's, and none of these generators makes one).
  if (isFlat(machine) && slow > 0) throw new Error(`${kind}: ${slow} steps fell back to xstate`);
}
