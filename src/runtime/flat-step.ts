// xstate's macrostep, specialised for the machines the runtime hosts: one level of atomic or final states
// under the root, guards that are plain functions, actions that are all `assign`, no entry/exit actions,
// no invokes, no history, no delays, no wildcards. For such a machine the SCXML algorithm xstate runs
// (select a transition in the atomic state, else in the root; exit the state, run the actions, enter the
// target; a final target ends the machine; then eventless transitions until none is enabled) reduces to
// a few lookups, and this module runs exactly that, building the snapshot xstate would build (the same
// fields, in the same order, a new object exactly when xstate makes one). Each machine is checked once;
// one that uses anything else gets `undefined` here and the caller takes xstate's own path, as does a
// snapshot that is not active or not of this shape, an `xstate.*` event, and any step that throws (so
// errors are xstate's own). A property test compares both paths for every hosted machine.
import { assign, type AnyMachineSnapshot, type AnyStateMachine } from 'xstate';

type Fn = (args: unknown, params: unknown) => unknown;

interface Transition {
  guard: Fn | null;
  /** Each assign's assignment: a function, or an object of values and property functions. */
  assigns: (Fn | Record<string, unknown>)[];
  target: State | null;
}

interface State {
  node: unknown;
  key: string;
  final: boolean;
  tags: readonly string[];
  on: Map<string, Transition[]>;
  always: Transition[] | null;
}

interface Flat {
  root: unknown;
  rootOn: Map<string, Transition[]>;
  rootAlways: Transition[] | null;
  states: Map<string, State>;
  /** `root.tags` (the root is in every snapshot's `_nodes`). */
  rootTags: readonly string[];
}

/** Thrown inside the fast path for anything it does not do (e.g. `spawn`): the caller takes xstate's path. */
class Unsupported extends Error {}

const ASSIGN_RESOLVE = (assign({}) as unknown as { resolve: unknown }).resolve;
const compiled = new WeakMap<AnyStateMachine, Flat | null>();

// The StateNode fields used here are public on xstate's StateNode; typed loosely on purpose.
interface Node {
  type: string;
  key: string;
  parent?: Node;
  states: Record<string, Node>;
  entry: unknown[];
  exit: unknown[];
  invoke: unknown[];
  tags: string[];
  history: unknown;
  output: unknown;
  config: { after?: unknown };
  initial?: { actions: unknown[] };
  transitions: Map<string, TransitionDef[]>;
  always?: TransitionDef[];
}

interface TransitionDef {
  guard?: unknown;
  actions: unknown[];
  target?: Node[];
  reenter: boolean;
  source: Node;
}

function compile(machine: AnyStateMachine): Flat | null {
  const impl = machine.implementations as { guards: Record<string, unknown>; actions: Record<string, unknown> };
  const root = machine.root as unknown as Node;
  const plain = (n: Node) => n.entry.length === 0 && n.exit.length === 0 && n.invoke.length === 0 && !n.history && n.config.after === undefined;
  if (root.type !== 'compound' || !plain(root) || root.output !== undefined || (root.initial?.actions.length ?? 0) > 0) return null;
  const children = Object.values(root.states);
  const states = new Map<string, State>();
  for (const child of children) {
    if ((child.type !== 'atomic' && child.type !== 'final') || !plain(child) || Object.keys(child.states ?? {}).length > 0) return null;
    states.set(child.key, { node: child, key: child.key, final: child.type === 'final', tags: child.tags, on: new Map(), always: null });
  }
  const guardOf = (g: unknown): Fn | null | undefined => {
    if (g === undefined) return null;
    const f = typeof g === 'function' ? g : typeof g === 'string' ? impl.guards[g] : undefined;
    return typeof f === 'function' && !('check' in f) ? (f as Fn) : undefined;
  };
  const assignOf = (a: unknown): Fn | Record<string, unknown> | undefined => {
    const f = typeof a === 'function' ? a : typeof a === 'string' ? impl.actions[a] : undefined;
    if (typeof f !== 'function') return undefined;
    const action = f as unknown as { type?: unknown; resolve?: unknown; assignment?: unknown; execute?: unknown; retryResolve?: unknown };
    if (action.type !== 'xstate.assign' || action.resolve !== ASSIGN_RESOLVE || 'execute' in action || 'retryResolve' in action) return undefined;
    const assignment = action.assignment;
    return typeof assignment === 'function' || (typeof assignment === 'object' && assignment !== null) ? (assignment as Fn | Record<string, unknown>) : undefined;
  };
  const transitionOf = (t: TransitionDef): Transition | undefined => {
    if (t.reenter) return undefined;
    const guard = guardOf(t.guard);
    if (guard === undefined) return undefined;
    const assigns: (Fn | Record<string, unknown>)[] = [];
    for (const a of t.actions) {
      const assignment = assignOf(a);
      if (!assignment) return undefined;
      assigns.push(assignment);
    }
    let target: State | null = null;
    if (t.target !== undefined) {
      if (t.target.length !== 1 || t.target[0]!.parent !== root) return undefined;
      target = states.get(t.target[0]!.key) ?? null;
      if (!target || target.node !== t.target[0]) return undefined;
    }
    return { guard, assigns, target };
  };
  const onOf = (n: Node): Map<string, Transition[]> | undefined => {
    const on = new Map<string, Transition[]>();
    for (const [descriptor, list] of n.transitions) {
      if (descriptor === '*' || descriptor.endsWith('.*')) return undefined;
      const ts: Transition[] = [];
      for (const t of list) {
        const c = transitionOf(t);
        if (!c) return undefined;
        ts.push(c);
      }
      on.set(descriptor, ts);
    }
    return on;
  };
  const alwaysOf = (n: Node): Transition[] | null | undefined => {
    if (!n.always) return null;
    const ts: Transition[] = [];
    for (const t of n.always) {
      const c = transitionOf(t);
      if (!c) return undefined;
      ts.push(c);
    }
    return ts;
  };
  const rootOn = onOf(root);
  const rootAlways = alwaysOf(root);
  if (!rootOn || rootAlways === undefined) return null;
  for (const child of children) {
    const state = states.get(child.key)!;
    const on = onOf(child);
    const always = alwaysOf(child);
    if (!on || always === undefined) return null;
    state.on = on;
    state.always = always;
  }
  return { root, rootOn, rootAlways, states, rootTags: root.tags };
}

function flatOf(machine: AnyStateMachine): Flat | null {
  let flat = compiled.get(machine);
  if (flat === undefined) {
    flat = compile(machine);
    compiled.set(machine, flat);
  }
  return flat;
}

/** Whether `machine` takes the fast path (otherwise every step is xstate's own). */
export function isFlat(machine: AnyStateMachine): boolean {
  return flatOf(machine) !== null;
}

function spawn(): never {
  throw new Unsupported('spawn');
}

function select(list: Transition[] | undefined, context: unknown, event: unknown): Transition | null {
  if (list === undefined) return null;
  for (let i = 0; i < list.length; i++) {
    const t = list[i]!;
    if (t.guard === null || t.guard({ context, event }, undefined)) return t;
  }
  return null;
}

const MAX_EVENTLESS = 1000;

/**
 * The snapshot `machine.transition(snapshot, event, scope)` returns, computed directly; `undefined` when
 * this machine, snapshot or event is not one the fast path handles (the caller then runs xstate).
 */
export function flatStep(
  machine: AnyStateMachine,
  snapshot: AnyMachineSnapshot,
  event: { type: string },
  scope: { self: unknown; system: unknown },
): AnyMachineSnapshot | undefined {
  const flat = flatOf(machine);
  if (flat === null || snapshot.status !== 'active' || snapshot.machine !== machine || event.type.startsWith('xstate.')) return undefined;
  const s = snapshot as unknown as {
    value: unknown;
    context: unknown;
    _nodes: unknown[];
    historyValue: unknown;
  };
  if (typeof s.value !== 'string') return undefined;
  const from = flat.states.get(s.value);
  const nodes = s._nodes;
  if (from === undefined || nodes.length !== 2 || nodes[0] !== flat.root || nodes[1] !== from.node) return undefined;
  try {
    let context = s.context;
    let state = from;
    /** Whether xstate would have made a new snapshot object by now. */
    let changed = false;
    const apply = (t: Transition): boolean => {
      const assigns = t.assigns;
      for (let i = 0; i < assigns.length; i++) {
        const assignment = assigns[i]!;
        const args = { context, event, spawn, self: scope.self, system: scope.system };
        let partial: unknown;
        if (typeof assignment === 'function') partial = assignment(args, undefined);
        else {
          const p: Record<string, unknown> = {};
          for (const key of Object.keys(assignment)) {
            const v = assignment[key];
            p[key] = typeof v === 'function' ? (v as Fn)(args, undefined) : v;
          }
          partial = p;
        }
        context = Object.assign({}, context, partial);
      }
      const moved = t.target !== null && t.target !== state;
      if (moved) state = t.target!;
      return assigns.length > 0 || moved;
    };
    const first = select(state.on.get(event.type), context, event) ?? select(flat.rootOn.get(event.type), context, event);
    let done = false;
    if (first !== null) {
      changed = apply(first) || changed;
      // Entering a final child of the root ends the machine (its output is undefined: the root has none).
      done = first.target !== null && first.target.final;
    }
    // Eventless transitions, until one changes nothing (xstate then stops looking) or none is enabled.
    for (let n = 0; !done; n++) {
      if (n > MAX_EVENTLESS) return undefined;
      let t: Transition | null = null;
      if (state.always !== null) t = select(state.always, context, event);
      if (t === null && flat.rootAlways !== null) t = select(flat.rootAlways, context, event);
      if (t === null) break;
      const moved = apply(t);
      changed = moved || changed;
      done = t.target !== null && t.target.final;
      if (!moved) break;
    }
    if (!changed && !done) return snapshot;
    const tags = state.tags.length === 0 && flat.rootTags.length === 0 ? [] : [...flat.rootTags, ...state.tags];
    const src = snapshot as unknown as Record<string, unknown>;
    return {
      status: done ? 'done' : src.status,
      output: done ? undefined : src.output,
      error: src.error,
      machine: src.machine,
      context,
      // xstate sorts the new node list in place, deepest first, when the machine is done.
      _nodes: state === from ? nodes : done ? [state.node, flat.root] : [flat.root, state.node],
      value: state.key,
      tags: new Set(tags),
      children: src.children,
      historyValue: s.historyValue || {},
      matches: src.matches,
      hasTag: src.hasTag,
      can: src.can,
      getMeta: src.getMeta,
      toJSON: src.toJSON,
    } as unknown as AnyMachineSnapshot;
  } catch {
    return undefined;
  }
}
