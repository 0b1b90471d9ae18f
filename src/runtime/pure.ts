// Pure transitions at speed. xstate's `transition()` builds a whole inert actor (and runs the machine's
// initial state) on every call, which caps replay near 100k events/s. The same pure step is the public
// `machine.transition(snapshot, event, actorScope)` with one inert scope per machine, reused: our
// machines spawn no children and run no custom actions, so the scope carries no state between calls.
// A test checks that both paths give identical snapshots.
import { createActor, type AnyStateMachine, type AnyMachineSnapshot } from 'xstate';

const scopes = new WeakMap<AnyStateMachine, unknown>();

function inertScope(machine: AnyStateMachine, input: unknown): unknown {
  let scope = scopes.get(machine);
  if (!scope) {
    const self = createActor(machine, { input } as never);
    const noop = () => {};
    scope = { self, id: '', sessionId: '', system: self.system, defer: noop, logger: noop, stopChild: noop, emit: noop, actionExecutor: noop };
    scopes.set(machine, scope);
  }
  return scope;
}

export function step(machine: AnyStateMachine, snapshot: AnyMachineSnapshot, event: { type: string }): AnyMachineSnapshot {
  return machine.transition(snapshot, event, inertScope(machine, snapshot.context) as never) as AnyMachineSnapshot;
}

/** The machine's initial snapshot for `input`, through the same reused inert scope. */
export function initial(machine: AnyStateMachine, input: unknown): AnyMachineSnapshot {
  return machine.getInitialSnapshot(inertScope(machine, input) as never, input) as AnyMachineSnapshot;
}
