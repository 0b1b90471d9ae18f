// Rebuilding actors from journal entries (SPEC §14): the core of replay and verify, and the one place
// besides pure.ts that steps machines. An entry is applied with the machine of its kind at its version
// (versions.ts: an entry this build cannot recompute is refused, never recomputed with other
// transitions). For machines in the fast path's subset (flat-step.ts, machines/README.md) an actor is
// kept lean: its state and context, no snapshot object per event; any other machine, and any step the
// fast path leaves to xstate, goes through pure.ts. bench/step-equivalence.ts drives this against
// xstate's own transition() for every kind.
import type { AnyMachineSnapshot, AnyStateMachine } from 'xstate';
import { step, initial, scopeOf } from './pure.js';
import { advance, materialize, toLean, leanInitial, SAME, CHANGED, DONE, type Lean } from './flat-step.js';
import type { JournalEntry } from '../../store/db.js';
import { KINDS, type ActorKind } from './kinds.js';
import { kindAt, unknownVersion } from './versions.js';

export interface ReplayStep {
  entry: JournalEntry;
  before: unknown;
  after: unknown;
  state: AnyMachineSnapshot;
}

/**
 * One actor being rebuilt. While its machine is flat and it is active it is kept lean (state and
 * context: no snapshot object per event, which also keeps the garbage collector's work small with many
 * actors); otherwise it is its snapshot, stepped by xstate.
 */
interface Actor {
  machine: AnyStateMachine;
  lean: Lean | null;
  snap: AnyMachineSnapshot | null;
}

/** A reported step; its snapshot is built when asked for (the same snapshot the host's step gives). */
class Step implements ReplayStep {
  #snap: AnyMachineSnapshot | null;
  // The lean actor as of this step (its fields: the actor itself moves on).
  readonly #flat: Lean['flat'] | null;
  readonly #state: Lean['state'] | null;
  readonly #context: unknown;
  readonly #base: AnyMachineSnapshot | null;

  constructor(
    readonly entry: JournalEntry,
    readonly before: unknown,
    readonly after: unknown,
    lean: Lean | null,
    snap: AnyMachineSnapshot | null,
  ) {
    this.#snap = snap;
    this.#flat = lean?.flat ?? null;
    this.#state = lean?.state ?? null;
    this.#context = lean?.context;
    this.#base = lean?.base ?? null;
  }

  get state(): AnyMachineSnapshot {
    this.#snap ??= materialize({ flat: this.#flat!, state: this.#state!, context: this.#context, base: this.#base! }, false);
    return this.#snap;
  }
}

const templates = new WeakMap<AnyStateMachine, AnyMachineSnapshot>();

function create(machine: AnyStateMachine, input: unknown): Actor {
  const template = templates.get(machine);
  if (template === undefined) {
    const first = initial(machine, input);
    const lean = toLean(machine, first);
    if (lean === undefined) return { machine, lean: null, snap: first };
    templates.set(machine, first);
    return { machine, lean, snap: null };
  }
  const lean = leanInitial(machine, template, input, scopeOf(machine, input));
  return lean ? { machine, lean, snap: null } : { machine, lean: null, snap: initial(machine, input) };
}

/**
 * Rebuilds actors from journal entries applied in order, each actor from its first event: the core of
 * replay and verify (bench/step-equivalence.ts drives it too, against xstate's own transitions).
 */
export class Rebuild {
  private readonly actors = new Map<string, Actor>();
  /** The actor of the last applied entry, and its state value before and after it. */
  private actor: Actor | null = null;
  before: unknown;
  after: unknown;

  constructor(
    private readonly kinds: Record<string, ActorKind> = KINDS,
    /** Named when an entry cannot be recomputed (versions.ts). */
    private readonly dataDir = 'this data dir',
  ) {}

  apply(entry: JournalEntry): void {
    const kind = kindAt(this.kinds, entry) ?? refuse(this.kinds, entry, this.dataDir);
    const machine = kind.machine;
    let actor = this.actors.get(entry.actor);
    if (actor === undefined) {
      actor = create(machine, entry.input);
      this.actors.set(entry.actor, actor);
    } else if (actor.machine !== machine) {
      // Another kind's machine for this actor (the host refuses that, but the journal is the input here).
      actor.snap = actor.lean ? materialize(actor.lean, false) : actor.snap;
      actor.lean = null;
      actor.machine = machine;
    }
    this.actor = actor;
    const lean = actor.lean;
    if (lean !== null) {
      const before = lean.state.key;
      const r = advance(lean, entry.event, scopeOf(machine, lean.context));
      if (r === SAME || r === CHANGED) {
        this.before = before;
        this.after = lean.state.key;
        return;
      }
      if (r === DONE) {
        actor.lean = null;
        actor.snap = materialize(lean, true);
        this.before = before;
        this.after = actor.snap.value;
        return;
      }
      // xstate's own step, from the snapshot this actor is in.
      actor.snap = materialize(lean, false);
      actor.lean = null;
    }
    const prev = actor.snap!;
    const next = step(machine, prev, entry.event);
    const back = toLean(machine, next);
    actor.lean = back ?? null;
    actor.snap = back ? null : next;
    this.before = prev.value;
    this.after = next.value;
  }

  /** The snapshot of the last applied entry's actor, as the host's step gives it. */
  snapshot(): AnyMachineSnapshot {
    const actor = this.actor!;
    return actor.lean ? materialize(actor.lean, false) : actor.snap!;
  }

  /** The last applied entry as a reported step (its snapshot is built only if asked for). */
  step(entry: JournalEntry): ReplayStep {
    const actor = this.actor!;
    return new Step(entry, this.before, this.after, actor.lean, actor.lean ? null : actor.snap);
  }
}

function refuse(kinds: Record<string, ActorKind>, entry: JournalEntry, dataDir: string): never {
  throw unknownVersion(kinds, entry, `journal entry #${entry.seq} (actor ${entry.actor})`, dataDir);
}
