// xstate's macrostep, specialised for the machines the runtime hosts: one level of atomic or final states
// under the root, guards that are plain functions, actions that are all `assign` (named, inline, or in
// object form with `params`, as are guards), no entry/exit actions, no invokes, no history, no delays,
// no wildcards (machines/README.md). For such a machine the SCXML algorithm xstate runs
// (select a transition in the atomic state, else in the root; exit the state, run the actions, enter the
// target; a final target ends the machine; then eventless transitions until none is enabled) reduces to
// a few lookups, and this module runs exactly that, building the snapshot xstate would build (the same
// fields, in the same order, a new object exactly when xstate makes one). Each machine is checked once;
// one that uses anything else gets `undefined` here and the caller takes xstate's own path, as does a
// snapshot that is not active or not of this shape, an `xstate.*` event, and any step that throws (so
// errors are xstate's own). bench/step-equivalence.ts compares this path with xstate's transition() for
// every kind in kinds.ts (a new kind needs an event generator there), and the property tests in
// test/machines.test.ts run through it for the bucket, in-flight and card-fetch machines.
import { assign, type AnyMachineSnapshot, type AnyStateMachine } from 'xstate';

type Fn = (args: unknown, params: unknown) => unknown;

/**
 * A guard's or action's `params` as written in object form: a value, or a function of `{ context, event }`
 * evaluated when it runs (xstate's rule); none for the string and inline forms.
 */
type Params = { fn: true; of: (args: { context: unknown; event: unknown }) => unknown } | { fn: false; value: unknown } | null;

interface Guard {
  check: Fn;
  params: Params;
}

interface Assign {
  /** The assignment: a function, or an object of values and property functions. */
  assignment: Fn | Record<string, unknown>;
  params: Params;
}

interface Transition {
  guard: Guard | null;
  assigns: Assign[];
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
  const plain = (n: Node) =>
    n.entry.length === 0 && n.exit.length === 0 && n.invoke.length === 0 && !n.history && n.config.after === undefined;
  if (root.type !== 'compound' || !plain(root) || root.output !== undefined || (root.initial?.actions.length ?? 0) > 0) return null;
  const children = Object.values(root.states);
  const states = new Map<string, State>();
  for (const child of children) {
    if ((child.type !== 'atomic' && child.type !== 'final') || !plain(child) || Object.keys(child.states ?? {}).length > 0) return null;
    states.set(child.key, { node: child, key: child.key, final: child.type === 'final', tags: child.tags, on: new Map(), always: null });
  }
  // A guard or action: inline (a function), by name, or in object form `{ type, params }`.
  const named = (x: unknown, impls: Record<string, unknown>): { f: unknown; params: Params } | undefined => {
    if (typeof x === 'function') return { f: x, params: null };
    if (typeof x === 'string') return { f: impls[x], params: null };
    if (typeof x !== 'object' || x === null || typeof (x as { type?: unknown }).type !== 'string') return undefined;
    const o = x as { type: string; params?: unknown };
    const params: Params = !('params' in o)
      ? null
      : typeof o.params === 'function'
        ? { fn: true, of: o.params as never }
        : { fn: false, value: o.params };
    return { f: impls[o.type], params };
  };
  const guardOf = (g: unknown): Guard | null | undefined => {
    if (g === undefined) return null;
    const n = named(g, impl.guards);
    return n && typeof n.f === 'function' && !('check' in n.f) ? { check: n.f as Fn, params: n.params } : undefined;
  };
  const assignOf = (a: unknown): Assign | undefined => {
    const n = named(a, impl.actions);
    if (!n || typeof n.f !== 'function') return undefined;
    const action = n.f as unknown as { type?: unknown; resolve?: unknown; assignment?: unknown; execute?: unknown; retryResolve?: unknown };
    if (action.type !== 'xstate.assign' || action.resolve !== ASSIGN_RESOLVE || 'execute' in action || 'retryResolve' in action)
      return undefined;
    const assignment = action.assignment;
    return typeof assignment === 'function' || (typeof assignment === 'object' && assignment !== null)
      ? { assignment: assignment as Fn | Record<string, unknown>, params: n.params }
      : undefined;
  };
  const transitionOf = (t: TransitionDef): Transition | undefined => {
    if (t.reenter) return undefined;
    const guard = guardOf(t.guard);
    if (guard === undefined) return undefined;
    const assigns: Assign[] = [];
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

/** A `params` as xstate evaluates it: a function of the context and event at that point, or the value. */
function paramsOf(params: Params, context: unknown, event: unknown): unknown {
  return params === null ? undefined : params.fn ? params.of({ context, event }) : params.value;
}

function select(list: Transition[] | undefined, context: unknown, event: unknown): Transition | null {
  if (list === undefined) return null;
  for (let i = 0; i < list.length; i++) {
    const t = list[i]!;
    if (t.guard === null || t.guard.check({ context, event }, paramsOf(t.guard.params, context, event))) return t;
  }
  return null;
}

const MAX_EVENTLESS = 1000;

type Scope = { self: unknown; system: unknown };

/**
 * An active actor of a flat machine, without a snapshot object: its state and context, and the snapshot
 * it was taken from (for the fields a step never changes: children, history, error, the methods).
 * Replay keeps actors this way and builds a snapshot only when one is asked for.
 */
export interface Lean {
  flat: Flat;
  state: State;
  context: unknown;
  base: AnyMachineSnapshot;
}

export const SAME = 0;
export const CHANGED = 1;
export const DONE = 2;
export const FALLBACK = 3;
/**
 * What `advance` did: nothing (xstate returns the same snapshot object), a new active snapshot, a final
 * state (the machine is done), or nothing because this step is xstate's to take (`lean` is untouched).
 */
export type Advance = typeof SAME | typeof CHANGED | typeof DONE | typeof FALLBACK;

/** `snapshot` as a Lean, when it is an active snapshot of a flat machine in the shape xstate makes. */
export function toLean(machine: AnyStateMachine, snapshot: AnyMachineSnapshot): Lean | undefined {
  const flat = flatOf(machine);
  if (flat === null || snapshot.status !== 'active' || snapshot.machine !== machine || typeof snapshot.value !== 'string') return undefined;
  const state = flat.states.get(snapshot.value);
  const nodes = (snapshot as unknown as { _nodes: unknown[] })._nodes;
  if (state === undefined || state.final || nodes.length !== 2 || nodes[0] !== flat.root || nodes[1] !== state.node) return undefined;
  return { flat, state, context: snapshot.context, base: snapshot };
}

function assignAll(assigns: Transition['assigns'], context: unknown, event: unknown, scope: Scope): unknown {
  for (let i = 0; i < assigns.length; i++) {
    const { assignment, params: written } = assigns[i]!;
    const params = paramsOf(written, context, event);
    const args = { context, event, spawn, self: scope.self, system: scope.system };
    let partial: unknown;
    if (typeof assignment === 'function') partial = assignment(args, params);
    else {
      const p: Record<string, unknown> = {};
      for (const key of Object.keys(assignment)) {
        const v = assignment[key];
        p[key] = typeof v === 'function' ? (v as Fn)(args, params) : v;
      }
      partial = p;
    }
    // Spread, not Object.assign({}, context, partial) as xstate does: the same keys, values and order, but
    // assign adds each key as a keyed store, and past a dozen V8 turns the object into a hash table (a
    // call's context of 24 fields became one, ~1.6 KB each, slower to read and to encode). The one case
    // where they differ, an own "__proto__" key in the partial (parsed JSON), no machine here returns:
    // every assign gives a literal of fixed keys.
    context = { ...(context as object), ...(partial as object) };
  }
  return context;
}

// Where `settle` leaves its result (module scratch rather than an object per step: replay applies
// hundreds of thousands of events, and every allocation there is garbage collector work).
let outState: State;
let outContext: unknown;

/**
 * Eventless transitions from `state` (xstate runs them after every step, with the step's event), until
 * one changes nothing (xstate then stops looking), none is enabled, or a final state is entered.
 * Returns the outcome and leaves the result in outState/outContext; FALLBACK past MAX_EVENTLESS.
 */
function settle(flat: Flat, state: State, context: unknown, event: unknown, scope: Scope, changed: boolean): Advance {
  for (let n = 0; ; n++) {
    if (n > MAX_EVENTLESS) return FALLBACK;
    let t: Transition | null = null;
    if (state.always !== null) t = select(state.always, context, event);
    if (t === null && flat.rootAlways !== null) t = select(flat.rootAlways, context, event);
    if (t === null) break;
    const moved = t.target !== null && t.target !== state;
    if (t.assigns.length > 0) context = assignAll(t.assigns, context, event, scope);
    if (moved) state = t.target!;
    if (t.assigns.length === 0 && !moved) break;
    changed = true;
    if (state.final) {
      outState = state;
      outContext = context;
      return DONE;
    }
  }
  outState = state;
  outContext = context;
  return changed ? CHANGED : SAME;
}

/** Applies `event` to `lean` in place, as xstate's macrostep would. */
export function advance(lean: Lean, event: { type: string }, scope: Scope): Advance {
  if (event.type.startsWith('xstate.')) return FALLBACK;
  const flat = lean.flat;
  try {
    const from = lean.state;
    let state = from;
    let context = lean.context;
    const first = select(from.on.get(event.type), context, event) ?? select(flat.rootOn.get(event.type), context, event);
    let changed = false;
    if (first !== null) {
      if (first.assigns.length > 0) context = assignAll(first.assigns, context, event, scope);
      if (first.target !== null) state = first.target;
      changed = first.assigns.length > 0 || state !== from;
      // Entering a final child of the root ends the machine (its output is undefined: the root has none).
      if (state.final) {
        lean.state = state;
        lean.context = context;
        return DONE;
      }
    }
    const r = settle(flat, state, context, event, scope, changed);
    if (r !== FALLBACK) {
      lean.state = outState;
      lean.context = outContext;
    }
    return r;
  } catch {
    return FALLBACK;
  }
}

/**
 * The snapshot xstate holds for `lean` (`done`: the step that got here entered a final state). A new
 * object, as xstate makes one for every step that changes anything.
 */
export function materialize(lean: Lean, done: boolean): AnyMachineSnapshot {
  const { flat, state } = lean;
  const src = lean.base as unknown as Record<string, unknown>;
  const nodes = src._nodes as unknown[];
  const tags = state.tags.length === 0 && flat.rootTags.length === 0 ? [] : [...flat.rootTags, ...state.tags];
  return {
    status: done ? 'done' : src.status,
    output: done ? undefined : src.output,
    error: src.error,
    machine: src.machine,
    context: lean.context,
    // The node list is [root, state]; xstate sorts it in place, deepest first, when the machine is done.
    _nodes: !done && nodes[1] === state.node ? nodes : done ? [state.node, flat.root] : [flat.root, state.node],
    value: state.key,
    tags: new Set(tags),
    children: src.children,
    historyValue: src.historyValue || {},
    matches: src.matches,
    hasTag: src.hasTag,
    can: src.can,
    getMeta: src.getMeta,
    toJSON: src.toJSON,
  } as unknown as AnyMachineSnapshot;
}

/**
 * The snapshot `machine.transition(snapshot, event, scope)` returns, computed directly; `undefined` when
 * this machine, snapshot or event is not one the fast path handles (the caller then runs xstate).
 */
export function flatStep(
  machine: AnyStateMachine,
  snapshot: AnyMachineSnapshot,
  event: { type: string },
  scope: Scope,
): AnyMachineSnapshot | undefined {
  const lean = toLean(machine, snapshot);
  if (lean === undefined) return undefined;
  const r = advance(lean, event, scope);
  return r === FALLBACK ? undefined : r === SAME ? snapshot : materialize(lean, r === DONE);
}

/**
 * The initial state `machine.getInitialSnapshot(scope, input)` has, as a Lean on `template` (a snapshot
 * of this machine from xstate, for the fields no step changes); `undefined` when xstate must compute it
 * (a context factory that spawns, a final initial state, anything that throws).
 */
export function leanInitial(machine: AnyStateMachine, template: AnyMachineSnapshot, input: unknown, scope: Scope): Lean | undefined {
  const flat = flatOf(machine);
  const base = toLean(machine, template);
  if (flat === null || base === undefined) return undefined;
  const root = machine.root as unknown as { initial?: { target: { key: string }[] } };
  const first = flat.states.get(root.initial?.target[0]?.key ?? '');
  if (first === undefined || first.final || (root.initial?.target.length ?? 0) !== 1) return undefined;
  try {
    // As xstate: a context factory's result is assigned onto {} (a copy); a context object is used as is.
    const factory = (machine.config as { context?: unknown }).context;
    const context =
      typeof factory === 'function' ? Object.assign({}, {}, factory({ spawn, input, self: scope.self })) : factory ? factory : {};
    // The initial macrostep runs eventless transitions with the init event.
    const r = settle(flat, first, context, { type: 'xstate.init', input }, scope, false);
    if (r === FALLBACK || r === DONE) return undefined;
    return { flat, state: outState, context: outContext, base: template };
  } catch {
    return undefined;
  }
}
