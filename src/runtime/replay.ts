// Replay (SPEC §14): rebuild machine states from the journal with pure transitions — no side effects,
// no timers — and compare them with the stored snapshots. Reading the journal and comparing live here;
// rebuilding actors from entries is rebuild.ts.
import { isDeepStrictEqual } from 'node:util';
import { type Store, seqKey, fullCheck, type JournalEntry, type SnapshotRecord } from '../../store/db.js';
import { pack, unpack } from '../../store/codec.js';
import { KINDS, type ActorKind } from './kinds.js';
import type { Damage } from '../../store/chain.js';
import { Rebuild, type ReplayStep } from './rebuild.js';

export type { ReplayStep } from './rebuild.js';
import { kindAt, unknownVersion } from './versions.js';
import { decodeValue } from './journal-decode.js';

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
  const options: { lte?: string; highWaterMarkBytes: number; valueEncoding: 'buffer' } = {
    highWaterMarkBytes: BATCH_BYTES,
    valueEncoding: 'buffer',
  };
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
 * Calls `onStep` for every transition in journal order (each actor rebuilt from its first event); steps
 * before `from` are applied but not reported. Returns the number of events applied.
 */
export async function replay(
  store: Store,
  filter: ReplayFilter,
  onStep: (step: ReplayStep) => void,
  kinds: Record<string, ActorKind> = KINDS,
): Promise<number> {
  const rebuild = new Rebuild(kinds, store.dataDir);
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
  const rebuild = new Rebuild(kinds, store.dataDir);
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
      const kind = kindAt(kinds, rec);
      if (!kind) throw unknownVersion(kinds, rec, `the snapshot of actor ${entry.actor} (as of #${rec.seq})`, store.dataDir);
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
