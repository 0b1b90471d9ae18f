// An actor in the host's memory and its stored form (the `snapshots` sublevel): what is written at a
// checkpoint or a passivation, and how a stored snapshot becomes a machine snapshot again.
import type { AnyMachineSnapshot } from 'xstate';
import type { SnapshotRecord, WriteOp, Store } from '../../store/db.js';
import type { ActorKind } from './kinds.js';

/** An actor in memory. */
export interface Live {
  id: string;
  kind: string;
  input: unknown;
  state: AnyMachineSnapshot;
  /** Seq of the last applied event; 0 for an actor with no journaled event yet. */
  seq: number;
  deadline: number | null;
}

/** The write of `actor`'s snapshot, stamped with its kind's version (versions.ts). */
export function snapshotOp(store: Store, kind: ActorKind, actor: Live): WriteOp {
  const record: SnapshotRecord = {
    kind: actor.kind,
    version: kind.version,
    seq: actor.seq,
    input: actor.input,
    state: kind.machine.getPersistedSnapshot(actor.state),
    deadline: actor.deadline,
  };
  return { type: 'put', sublevel: store.snapshots, key: actor.id, value: record };
}

/** The machine snapshot of a stored one (a context of an earlier shape upgraded first: `kind.upgrade`). */
export function restoreSnapshot(kind: ActorKind, persisted: unknown): AnyMachineSnapshot {
  const p = persisted as { value: unknown; context: unknown };
  const context = kind.upgrade ? kind.upgrade(p.context) : p.context;
  return kind.machine.resolveState({ value: p.value as never, context: context as never });
}
