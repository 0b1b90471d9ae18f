// Checkpoints (SPEC §14): every `every` events, the snapshots of all actors that moved are written and
// meta `checkpoint` records the seq they are current as of; start-up applies only the journal past it.
// A checkpoint rides in the event batches, up to `slice` snapshots in each, the checkpoint seq in the
// batch with the last of them: written at once, 10 000 snapshots held the event loop for ~0.4 s (every
// call waited) and made one huge fsync. The seq is the last one assigned when the checkpoint began: every
// actor that had moved by then gets a snapshot at least that recent (in a slice, or when it is
// passivated), and one that had not already has it.
import type { Store, WriteOp } from '../../store/db.js';
import type { Live } from './snapshots.js';

/** The host's memory, as far as a checkpoint reads it. */
export interface Memory {
  readonly live: Map<string, Live>;
  /** Live actors whose state is ahead of their stored snapshot. */
  readonly dirty: Set<string>;
  /** Actors whose passivation (with its snapshot) is in a batch being written. */
  readonly evicting: Set<string>;
  /** The actor's snapshot write; throws when it cannot be made. */
  snapshotOp(actor: Live): WriteOp;
  /** The same, or null (reported) when it cannot be made: the batch's events still go. */
  tryToSnapshot(actor: Live): WriteOp | null;
}

export class Checkpoints {
  /** A checkpoint under way: the seq it will record, and the actors whose snapshots are still to go out. */
  private under: { seq: number; actors: string[] } | null = null;
  private since = 0;

  constructor(
    private readonly store: Store,
    private readonly memory: Memory,
    private readonly every: number,
    private readonly slice: number,
  ) {}

  /** One more event applied. */
  counted(): void {
    this.since++;
  }

  /** Begins a checkpoint as of `lastSeq` (the newest seq assigned) once `every` events were applied since the last. */
  beginIfDue(lastSeq: number): void {
    if (this.since < this.every || this.under) return;
    this.under = { seq: lastSeq, actors: [...this.memory.dirty] };
    this.since = 0;
  }

  /** Adds the next slice of the checkpoint under way to a batch's ops; returns the actors it snapshots (id, seq). */
  sliceInto(ops: WriteOp[]): [string, number][] {
    const cp = this.under;
    if (!cp) return [];
    const { live, dirty, evicting } = this.memory;
    const snapshotted: [string, number][] = [];
    while (cp.actors.length > 0 && snapshotted.length < this.slice) {
      const id = cp.actors.pop()!;
      const actor = live.get(id);
      // Passivated (or being passivated) since: its snapshot is written with its eviction.
      if (!actor || !dirty.has(id) || evicting.has(id)) continue;
      const op = this.memory.tryToSnapshot(actor);
      if (!op) {
        // This checkpoint cannot be complete: the last one stays, and recovery replays from there.
        this.under = null;
        return snapshotted;
      }
      ops.push(op);
      snapshotted.push([id, actor.seq]);
    }
    if (cp.actors.length === 0) {
      ops.push({ type: 'put', sublevel: this.store.meta, key: 'checkpoint', value: cp.seq });
      this.under = null;
    }
    return snapshotted;
  }

  /** A whole checkpoint in one write, as of `lastSeq` (at start-up and at close); throws what the write throws. */
  async writeAll(lastSeq: number, sync: boolean): Promise<void> {
    const ops: WriteOp[] = [];
    for (const id of this.memory.dirty) {
      const actor = this.memory.live.get(id);
      if (actor) ops.push(this.memory.snapshotOp(actor));
    }
    ops.push({ type: 'put', sublevel: this.store.meta, key: 'checkpoint', value: lastSeq });
    await this.store.write(ops, { sync });
    this.memory.dirty.clear();
    this.reset();
  }

  /** Forgets the checkpoint under way (memory is rebuilt, or a whole one was just written). */
  reset(): void {
    this.since = 0;
    this.under = null;
  }
}
