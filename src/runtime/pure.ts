// Pure transitions: the one interface through which the host (and replay, for what its lean actors
// leave to it: rebuild.ts) steps a machine. xstate's `transition()` builds a whole inert actor (and runs
// the machine's initial state) on every call, which capped replay near 100k events/s. The same pure step
// is the public `machine.transition(snapshot, event, actorScope)` with one inert scope per machine,
// reused: our machines spawn no children and run no custom actions, so the scope carries no state
// between calls. Machines in the fast path's subset (machines/README.md) take flat-step.ts, the same
// algorithm without xstate's generality and the same snapshots; any other machine is xstate's own step.
// The fast path stays in the host because it pays there: with every step through xstate, bench/runtime's
// append ran ~20% slower and start-up's apply ~40% (bucket ADMITs; bench/step: one step alone). Tests check
// that every path gives identical snapshots (bench/step-equivalence.ts).
import { createActor, type AnyStateMachine, type AnyMachineSnapshot } from 'xstate';
import { flatStep } from './flat-step.js';

interface Scope {
  self: unknown;
  system: unknown;
}

const scopes = new WeakMap<AnyStateMachine, Scope>();

/** The machine's inert scope (made, with `input`, on the machine's first use). */
export function scopeOf(machine: AnyStateMachine, input: unknown): Scope {
  let scope = scopes.get(machine);
  if (!scope) {
    const self = createActor(machine, { input } as never);
    const noop = () => {};
    scope = {
      self,
      id: '',
      sessionId: '',
      system: self.system,
      defer: noop,
      logger: noop,
      stopChild: noop,
      emit: noop,
      actionExecutor: noop,
    } as Scope;
    scopes.set(machine, scope);
  }
  return scope;
}

export function step(machine: AnyStateMachine, snapshot: AnyMachineSnapshot, event: { type: string }): AnyMachineSnapshot {
  const scope = scopeOf(machine, snapshot.context);
  return flatStep(machine, snapshot, event, scope) ?? (machine.transition(snapshot, event, scope as never) as AnyMachineSnapshot);
}

/** xstate's own pure step (no fast path): what `step` must always equal. */
export function xstateStep(machine: AnyStateMachine, snapshot: AnyMachineSnapshot, event: { type: string }): AnyMachineSnapshot {
  return machine.transition(snapshot, event, scopeOf(machine, snapshot.context) as never) as AnyMachineSnapshot;
}

/** The machine's initial snapshot for `input`, through the same reused inert scope. */
export function initial(machine: AnyStateMachine, input: unknown): AnyMachineSnapshot {
  return machine.getInitialSnapshot(scopeOf(machine, input) as never, input) as AnyMachineSnapshot;
}
