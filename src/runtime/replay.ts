// Replay (SPEC §14): rebuild machine states from the journal with pure transitions — no side effects,
// no timers — and compare them with the stored snapshots.
import { isDeepStrictEqual } from 'node:util';
import { transition, initialTransition, type AnyMachineSnapshot } from 'xstate';
import { Store, seqKey, type JournalEntry, type SnapshotRecord } from '../../store/db.js';
import { pack, unpack } from '../../store/codec.js';
import { KINDS, type ActorKind } from './kinds.js';
import { restoreSnapshot } from './host.js';

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

async function* entries(store: Store, filter: ReplayFilter): AsyncGenerator<JournalEntry> {
  if (filter.actor) {
    for await (const key of store.actorIndex.keys({ gt: `${filter.actor}!`, lt: `${filter.actor}!~` })) {
      const entry = (await store.journal.get(key.slice(filter.actor.length + 1))) as JournalEntry | undefined;
      if (!entry) throw new Error(`journal entry ${key} named by the actor index is missing`);
      if (filter.to !== undefined && entry.seq > filter.to) return;
      yield entry;
    }
    return;
  }
  const range = filter.to !== undefined ? { lte: seqKey(filter.to) } : {};
  for await (const value of store.journal.values(range)) yield value as JournalEntry;
}

/** Every transition in journal order (each actor rebuilt from its first event); steps before `from` are applied but not yielded. */
export async function* replay(store: Store, filter: ReplayFilter = {}, kinds: Record<string, ActorKind> = KINDS): AsyncGenerator<ReplayStep> {
  const states = new Map<string, AnyMachineSnapshot>();
  for await (const entry of entries(store, filter)) {
    const kind = kinds[entry.kind];
    if (!kind) throw new Error(`journal entry ${entry.seq} has unknown kind "${entry.kind}"`);
    const prev = states.get(entry.actor) ?? initialTransition(kind.machine, entry.input)[0];
    const [next] = transition(kind.machine, prev, entry.event as never);
    states.set(entry.actor, next);
    if (filter.from === undefined || entry.seq >= filter.from) yield { entry, before: prev.value, after: next.value, state: next };
  }
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
}

/** Rebuilds each actor and checks that its state at the snapshot's seq equals the snapshot. */
export async function verify(store: Store, actor?: string, kinds: Record<string, ActorKind> = KINDS): Promise<VerifyResult> {
  const snapshots = new Map<string, SnapshotRecord>();
  if (actor) {
    const rec = (await store.snapshots.get(actor)) as SnapshotRecord | undefined;
    if (rec) snapshots.set(actor, rec);
  } else {
    for await (const [key, value] of store.snapshots.iterator()) snapshots.set(key, value as SnapshotRecord);
  }
  const differences: Difference[] = [];
  const reached = new Set<string>();
  let events = 0;
  for await (const step of replay(store, actor ? { actor } : {}, kinds)) {
    events++;
    const rec = snapshots.get(step.entry.actor);
    if (!rec || rec.seq !== step.entry.seq) continue;
    reached.add(step.entry.actor);
    const rebuilt = unpack(pack(kinds[rec.kind]!.machine.getPersistedSnapshot(step.state)));
    if (!isDeepStrictEqual(rebuilt, rec.state)) {
      differences.push({ actor: step.entry.actor, seq: rec.seq, problem: describe(rebuilt, rec.state) });
    }
  }
  for (const [id, rec] of snapshots) {
    if (!reached.has(id)) differences.push({ actor: id, seq: rec.seq, problem: `the journal has no entry ${rec.seq} for this actor` });
  }
  return { events, snapshots: snapshots.size, checked: reached.size, differences };
}

function describe(rebuilt: unknown, stored: unknown): string {
  const r = rebuilt as { value?: unknown; context?: unknown };
  const s = stored as { value?: unknown; context?: unknown };
  if (!isDeepStrictEqual(r.value, s.value)) return `state ${JSON.stringify(r.value)} rebuilt, ${JSON.stringify(s.value)} in the snapshot`;
  return 'context differs from the snapshot';
}

export { restoreSnapshot };
