// bench/step: what one pure step costs, per path, on the bucket's ADMIT (the event a node appends most):
// xstate's public transition() (a whole inert actor per call) as the baseline, xstate's
// machine.transition() with one reused scope (pure.ts without its fast path), the host's step (pure.ts:
// the fast path for machines in its subset, machines/README.md) and replay's lean step (rebuild.ts: no
// snapshot object per event). Ratios are against the baseline in this same run.
// `node --expose-gc dist/bench/step.js [events]`
import { transition, type AnyMachineSnapshot } from 'xstate';
import { KINDS } from '../src/runtime/kinds.js';
import { step, xstateStep, initial } from '../src/runtime/pure.js';
import { Rebuild } from '../src/runtime/rebuild.js';

const INPUT = { limit: 1000, windowMs: 60_000 };
const machine = KINDS.bucket!.machine;

/** Events per second of `run` over `n` ADMITs 10 ms apart (a window of 1000 fills and slides). */
function rate(n: number, run: (event: { type: string; at: number }) => void): number {
  (globalThis as { gc?: () => void }).gc?.();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) run({ type: 'ADMIT', at: 1_700_000_000_000 + i * 10 });
  return Math.round((n / (performance.now() - t0)) * 1000);
}

function paths(n: number): Record<string, number> {
  let a: AnyMachineSnapshot = initial(machine, INPUT);
  let b = a;
  let c = a;
  const rebuild = new Rebuild();
  let seq = 0;
  return {
    'xstate transition() (baseline)': rate(Math.min(n, 50_000), (e) => {
      a = transition(machine, a as never, e as never)[0] as AnyMachineSnapshot;
    }),
    'machine.transition(), reused scope': rate(n, (e) => {
      b = xstateStep(machine, b, e);
    }),
    "the host's step (pure.ts, fast path)": rate(n, (e) => {
      c = step(machine, c, e);
    }),
    "replay's lean step (rebuild.ts)": rate(n, (e) =>
      rebuild.apply({ seq: ++seq, actor: 'b', kind: 'bucket', ...(seq === 1 ? { input: INPUT } : {}), event: e }),
    ),
  };
}

export function benchStep(n: number): boolean {
  console.log(`bench/step (node ${process.version}, ${n} bucket ADMITs, limit 1000 per 60 s)`);
  paths(Math.min(n, 20_000)); // warm-up
  const rates = paths(n);
  const base = Object.values(rates)[0]!;
  for (const [label, r] of Object.entries(rates)) console.log(`${label.padEnd(40)} ${`${r}/s`.padStart(12)}  ${(r / base).toFixed(2)}x`);
  return true;
}

if (import.meta.url === new URL(process.argv[1]!, 'file://').href) benchStep(Number(process.argv[2] ?? 500_000));
