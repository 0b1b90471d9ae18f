// Replay (SPEC §14): rebuild machine states from the journal with pure transitions — no side effects,
// no timers — and compare them with the stored snapshots.
import { isDeepStrictEqual } from 'node:util';
import type { AnyMachineSnapshot, AnyStateMachine } from 'xstate';
import { step, initial, scopeOf } from './pure.js';
import { advance, materialize, toLean, leanInitial, SAME, CHANGED, DONE, type Lean } from './flat-step.js';
import { Store, seqKey, type JournalEntry, type SnapshotRecord } from '../../store/db.js';
import { pack, unpack } from '../../store/codec.js';
import { KINDS, type ActorKind } from './kinds.js';
import { decodeValue } from './journal-decode.js';
import { fullCheck, type Damage } from '../../store/chain.js';

export interface ReplayStep {
  entry: JournalEntry;
  before: unknown;
  after: unknown;
  state: AnyMachineSnapshot;
}

export interface ReplayFilter {
  actor?: string;
  from?: number;
  to?: number;
}

const BATCH = 4096;
/**
 * classic-level stops a nextv() once it has read this many bytes (16 KiB by default: about 250 journal
 * entries, so each batch was a few hundred events and a round trip to LevelDB's thread).
 */
const BATCH_BYTES = 1 << 20;

/**
 * The journal's raw entries in seq order, a batch at a time. The next batch is requested before this one
 * is handed out, so LevelDB reads on its own thread while transitions run. Entries are decoded one at a
 * time as they are applied (journal-decode.ts), so a decoded entry is garbage before the next batch.
 */
async function* batches(store: Store, filter: ReplayFilter): AsyncGenerator<Buffer[]> {
  // highWaterMarkBytes is classic-level's own iterator option (not in abstract-level's types).
  const options: { lte?: string; highWaterMarkBytes: number; valueEncoding: 'buffer' } = { highWaterMarkBytes: BATCH_BYTES, valueEncoding: 'buffer' };
  if (filter.to !== undefined) options.lte = seqKey(filter.to);
  const values = store.journal.values(options);
  try {
    let next = values.nextv(BATCH);
    for (;;) {
      const page = (await next) as Buffer[];
      if (page.length === 0) return;
      next = values.nextv(BATCH);
      yield page;
    }
  } finally {
    await values.close();
  }
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
    this.#flat = lean && lean.flat;
    this.#state = lean && lean.state;
    this.#context = lean && lean.context;
    this.#base = lean && lean.base;
  }

  get state(): AnyMachineSnapshot {
    return (this.#snap ??= materialize({ flat: this.#flat!, state: this.#state!, context: this.#context, base: this.#base! }, false));
  }
}

const templates = new WeakMap<AnyStateMachine, AnyMachineSnapshot>();

function create(machine: AnyStateMachine, input: unknown): Actor {
  let template = templates.get(machine);
  if (template === undefined) {
    const first = initial(machine, input);
    const lean = toLean(machine, first);
    if (lean === undefined) return { machine, lean: null, snap: first };
    templates.set(machine, (template = first));
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

  constructor(private readonly kinds: Record<string, ActorKind> = KINDS) {}

  apply(entry: JournalEntry): void {
    const kind = this.kinds[entry.kind];
    if (!kind) throw new Error(`journal entry ${entry.seq} has unknown kind "${entry.kind}"`);
    const machine = kind.machine;
    let actor = this.actors.get(entry.actor);
    if (actor === undefined) this.actors.set(entry.actor, (actor = create(machine, entry.input)));
    else if (actor.machine !== machine) {
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

/**
 * Calls `onStep` for every transition in journal order (each actor rebuilt from its first event); steps
 * before `from` are applied but not reported. Returns the number of events applied.
 */
export async function replay(
  store: Store,
  filter: ReplayFilter,
  onStep: (step: ReplayStep) => void,
  kinds: Record<string, ActorKind> = KINDS,
): Promise<number> {
  const rebuild = new Rebuild(kinds);
  const from = filter.from ?? -Infinity;
  let applied = 0;
  const actor = filter.actor;
  for await (const page of batches(store, filter)) {
    for (let i = 0; i < page.length; i++) {
      const entry = decodeValue(page[i]!) as JournalEntry;
      if (actor !== undefined && entry.actor !== actor) continue;
      rebuild.apply(entry);
      applied++;
      if (entry.seq >= from) onStep(rebuild.step(entry));
    }
  }
  return applied;
}

export interface Difference {
  actor: string;
  seq: number;
  problem: string;
}

export interface VerifyResult {
  events: number;
  snapshots: number;
  checked: number;
  differences: Difference[];
  /**
   * The first damage to the journal itself (store/chain.ts): a missing seq, an entry that does not
   * decode, a batch whose bytes do not match the hash chain. Null when every entry is there and intact.
   */
  damage: Damage | null;
}

/**
 * Checks the whole journal (seq continuity from 1 and the hash chain, store/chain.ts), rebuilds each actor
 * and checks that its state at the snapshot's seq equals the snapshot. An entry that does not decode is
 * reported as damage and skipped.
 */
export async function verify(store: Store, actor?: string, kinds: Record<string, ActorKind> = KINDS): Promise<VerifyResult> {
  const snapshots = new Map<string, SnapshotRecord>();
  if (actor) {
    const rec = (await store.snapshots.get(actor)) as SnapshotRecord | undefined;
    if (rec) snapshots.set(actor, rec);
  } else {
    const all = store.snapshots.iterator({ highWaterMarkBytes: BATCH_BYTES } as object);
    try {
      for (let page = await all.nextv(BATCH); page.length > 0; page = await all.nextv(BATCH)) {
        for (const [key, value] of page) snapshots.set(key, value as SnapshotRecord);
      }
    } finally {
      await all.close();
    }
  }
  // Each snapshot is compared at its seq only: the entries are looked up by seq, not by actor.
  const due = new Map<number, string[]>();
  for (const [id, rec] of snapshots) {
    const ids = due.get(rec.seq);
    if (ids) ids.push(id);
    else due.set(rec.seq, [id]);
  }
  const differences: Difference[] = [];
  const reached = new Set<string>();
  const rebuild = new Rebuild(kinds);
  const chain = await fullCheck(store);
  let events = 0;
  for await (const page of batches(store, {})) {
    await chain.prepare(page.length);
    for (let i = 0; i < page.length; i++) {
      let entry: JournalEntry;
      try {
        entry = decodeValue(page[i]!) as JournalEntry;
      } catch {
        chain.entry(undefined, page[i]!);
        continue;
      }
      chain.entry(entry.seq, page[i]!);
      if (actor && entry.actor !== actor) continue;
      rebuild.apply(entry);
      events++;
      const ids = due.get(entry.seq);
      if (ids === undefined || !ids.includes(entry.actor)) continue;
      const rec = snapshots.get(entry.actor)!;
      reached.add(entry.actor);
      const kind = kinds[rec.kind]!;
      const rebuilt = comparable(kind, unpack(pack(kind.machine.getPersistedSnapshot(rebuild.snapshot()))));
      const stored = comparable(kind, rec.state);
      if (!isDeepStrictEqual(rebuilt, stored)) differences.push({ actor: entry.actor, seq: rec.seq, problem: describe(rebuilt, stored) });
    }
  }
  for (const [id, rec] of snapshots) {
    if (!reached.has(id)) differences.push({ actor: id, seq: rec.seq, problem: `the journal has no entry ${rec.seq} for this actor` });
  }
  return { events, snapshots: snapshots.size, checked: reached.size, differences, damage: await chain.end() };
}

/** A persisted snapshot in the form verify compares (snapshots written by earlier versions included). */
function comparable(kind: ActorKind, persisted: unknown): unknown {
  if (!kind.comparable) return persisted;
  const p = persisted as { context: unknown };
  return { ...p, context: kind.comparable(p.context) };
}

function describe(rebuilt: unknown, stored: unknown): string {
  const r = rebuilt as { value?: unknown; context?: unknown };
  const s = stored as { value?: unknown; context?: unknown };
  if (!isDeepStrictEqual(r.value, s.value)) return `state ${JSON.stringify(r.value)} rebuilt, ${JSON.stringify(s.value)} in the snapshot`;
  return 'context differs from the snapshot';
}

