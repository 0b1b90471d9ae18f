// Replay (SPEC §14): rebuild machine states from the journal with pure transitions — no side effects,
// no timers — and compare them with the stored snapshots.
import { isDeepStrictEqual } from 'node:util';
import type { AnyMachineSnapshot } from 'xstate';
import { step, initial } from './pure.js';
import { Store, seqKey, type JournalEntry, type SnapshotRecord } from '../../store/db.js';
import { pack, unpack } from '../../store/codec.js';
import { KINDS, type ActorKind } from './kinds.js';

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
 * Journal entries in seq order, a batch at a time (one actor's only, with --actor). The next batch is
 * requested before this one is handed out, so LevelDB reads on its own thread while transitions run.
 */
async function* batches(store: Store, filter: ReplayFilter): AsyncGenerator<JournalEntry[]> {
  // highWaterMarkBytes is classic-level's own iterator option (not in abstract-level's types).
  const options: { lte?: string; highWaterMarkBytes: number } = { highWaterMarkBytes: BATCH_BYTES };
  if (filter.to !== undefined) options.lte = seqKey(filter.to);
  const values = store.journal.values(options);
  try {
    let next = values.nextv(BATCH);
    for (;;) {
      const page = (await next) as JournalEntry[];
      if (page.length === 0) return;
      next = values.nextv(BATCH);
      yield filter.actor ? page.filter((e) => e.actor === filter.actor) : page;
    }
  } finally {
    await values.close();
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
  const states = new Map<string, AnyMachineSnapshot>();
  let applied = 0;
  for await (const page of batches(store, filter)) {
    for (const entry of page) {
      const kind = kinds[entry.kind];
      if (!kind) throw new Error(`journal entry ${entry.seq} has unknown kind "${entry.kind}"`);
      const prev = states.get(entry.actor) ?? initial(kind.machine, entry.input);
      const next = step(kind.machine, prev, entry.event);
      states.set(entry.actor, next);
      applied++;
      if (filter.from === undefined || entry.seq >= filter.from) onStep({ entry, before: prev.value, after: next.value, state: next });
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
  const events = await replay(store, actor ? { actor } : {}, (s) => {
    const rec = snapshots.get(s.entry.actor);
    if (!rec || rec.seq !== s.entry.seq) return;
    reached.add(s.entry.actor);
    const rebuilt = unpack(pack(kinds[rec.kind]!.machine.getPersistedSnapshot(s.state)));
    if (!isDeepStrictEqual(rebuilt, rec.state)) differences.push({ actor: s.entry.actor, seq: rec.seq, problem: describe(rebuilt, rec.state) });
  }, kinds);
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

