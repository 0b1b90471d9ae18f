// The actor host (SPEC §14). Machines run as pure xstate transitions over snapshots kept in memory (LRU,
// bounded) and in LevelDB. Each event is stamped (time, optional random bytes), its transition computed,
// and the journal entry (with any deadline index change) written in one atomic batch before anyone sees
// the new state. Snapshots are written at checkpoints and when an actor is passivated, both riding in the
// event batches; after a crash, the journal past the last checkpoint is applied again. Deadlines live in
// machine context and in an index, so one timer re-arms them after a restart.
// This file is the pipeline (queue, batches, memory, passivation, recovery from a failed write); each
// concern with state of its own is a module beside it: deadlines.ts (the index and its one timer),
// checkpoints.ts (snapshots riding in event batches), recovery.ts (the checked read of the journal at
// start), snapshots.ts (an actor's stored form), versions.ts (which entries this build may recompute).
import { randomBytes } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import type { AnyMachineSnapshot } from 'xstate';
import { step, initial } from './pure.js';
import { type Store, seqKey, checkActorId, type JournalEntry, type SnapshotRecord, type WriteOp } from '../../store/db.js';
import { KINDS, type ActorKind } from './kinds.js';
import { systemClock, type Clock } from './clock.js';
import { JournalDamagedError } from '../../store/chain.js';
import { DeadlineTimer, deadlineOps } from './deadlines.js';
import { Checkpoints } from './checkpoints.js';
import { journalPast, checkpointOf } from './recovery.js';
import { restoreSnapshot, snapshotOp, type Live } from './snapshots.js';
import { kindAt, unknownVersion } from './versions.js';

export { restoreSnapshot } from './snapshots.js';

export interface HostOptions {
  clock?: Clock;
  kinds?: Record<string, ActorKind>;
  /** Actors kept in memory; the least recently used beyond this are passivated to LevelDB. */
  maxLive?: number;
  /** Events between checkpoints (snapshots of every actor that moved, and the checkpoint seq). */
  checkpointEvery?: number;
  /** Snapshots a checkpoint adds to one event batch at most. */
  checkpointSlice?: number;
  /** Events written per LevelDB batch at most. */
  maxBatch?: number;
  /** fsync each batch: an acknowledged event then survives power loss, not just a process kill. */
  sync?: boolean;
  /** Where background write failures are reported (they are also recovered from). */
  onError?(err: unknown): void;
}

export interface SendOptions {
  /** Random bytes the host draws and journals in the event as `rnd`, so replay sees the same ones. */
  random?: number;
  /**
   * Records written in the same atomic batch as this event (not part of the journal: replay ignores
   * them), so a fact about the event's effect is on disk exactly when the event is.
   */
  alongside?: { sublevel: 'running' | 'payloads' | 'inbox' | 'paying'; key: string; value?: unknown }[];
}

type Event = { type: string; at?: number; [key: string]: unknown };

interface Pending {
  actor: string;
  kind: string;
  input: unknown;
  event: Event;
  random: number;
  alongside: NonNullable<SendOptions['alongside']>;
  /** The state this event led to, once computed. */
  state: AnyMachineSnapshot | null;
  resolve(state: AnyMachineSnapshot): void;
  reject(err: unknown): void;
}

/**
 * A computed batch: its writes, the events it answers, the actors it passivates and those a checkpoint
 * snapshots in it (id, seq).
 */
interface Batch {
  ops: WriteOp[];
  done: Pending[];
  evict: [string, number][];
  snapshotted: [string, number][];
}

const NONE: NonNullable<SendOptions['alongside']> = [];
/** Up to this many actors missing from memory in one batch are read synchronously (see readSnapshots). */
const SYNC_READS = 8;

export class ActorHost {
  private readonly clock: Clock;
  private readonly kinds: Record<string, ActorKind>;
  private readonly maxLive: number;
  private readonly maxBatch: number;
  private readonly sync: boolean;
  private readonly onError: (err: unknown) => void;
  private readonly live = new Map<string, Live>();
  /** Live actors whose state is ahead of their stored snapshot. */
  private readonly dirty = new Set<string>();
  /** Actors whose passivation is in a batch being written: forgotten once it lands, unless they moved. */
  private readonly evicting = new Set<string>();
  private readonly checkpoints: Checkpoints;
  private readonly deadlines: DeadlineTimer;
  private queue: Pending[] = [];
  private working: Promise<void> | null = null;
  private idleWaiters: { target: number; resolve(): void }[] = [];
  /** Events sent and events settled (resolved or refused): what `idle()` waits on. */
  private sent = 0;
  private settled = 0;
  private seq = 1;
  private closed = false;
  private reloading: Promise<void> | null = null;
  private reloaded: () => void = () => {};
  /** Damage found while rebuilding memory from the store: every event is refused from then on. */
  private damaged: JournalDamagedError | null = null;
  /** Actors passivated since start (their snapshot written, memory freed): read by the node's metrics. */
  readonly stats = { passivated: 0 };

  private constructor(
    readonly store: Store,
    opts: HostOptions,
  ) {
    this.clock = opts.clock ?? systemClock;
    this.kinds = opts.kinds ?? KINDS;
    this.maxLive = opts.maxLive ?? 10_000;
    this.maxBatch = opts.maxBatch ?? 4096;
    this.sync = opts.sync ?? false;
    this.onError = opts.onError ?? ((err) => process.emitWarning(`anet runtime: ${(err as Error).message}`));
    const memory = {
      live: this.live,
      dirty: this.dirty,
      evicting: this.evicting,
      snapshotOp: (a: Live) => this.snapshotOp(a),
      tryToSnapshot: (a: Live) => this.tryToSnapshot(a),
    };
    this.checkpoints = new Checkpoints(store, memory, opts.checkpointEvery ?? 50_000, opts.checkpointSlice ?? 256);
    this.deadlines = new DeadlineTimer(this.clock, store, (actor, kind) => this.send(actor, kind, undefined, { type: 'TICK' }));
  }

  /**
   * Opens the host on a store: applies the journal past the last checkpoint (left by a crash), then
   * re-arms every pending deadline (overdue ones fire at once).
   */
  static async start(store: Store, opts: HostOptions = {}): Promise<ActorHost> {
    const host = new ActorHost(store, opts);
    host.seq = await store.nextSeq();
    await host.recover();
    await host.deadlines.rearm();
    return host;
  }

  /**
   * Applies the journal past the checkpoint, read and checked by recovery.ts; an entry of a kind or
   * version this build does not have refuses the start (versions.ts). Then writes a checkpoint, so the
   * next start begins here.
   */
  private async recover(): Promise<void> {
    const checkpoint = await checkpointOf(this.store);
    let applied = 0;
    for await (const page of journalPast(this.store, checkpoint)) {
      for (const entry of page) {
        const kind = kindAt(this.kinds, entry);
        if (!kind) throw unknownVersion(this.kinds, entry, `journal entry #${entry.seq} (actor ${entry.actor})`, this.store.dataDir);
        const actor = await this.load(entry.actor, entry.kind, entry.input);
        this.touch(actor, entry.kind);
        if (entry.seq <= actor.seq) continue;
        actor.state = step(kind.machine, actor.state, entry.event);
        actor.seq = entry.seq;
        actor.deadline = kind.deadline(actor.state);
        this.dirty.add(actor.id);
        applied++;
      }
    }
    if (applied > 0 || checkpoint < this.seq - 1) await this.checkpoints.writeAll(this.seq - 1, this.sync);
    await this.passivate();
  }

  /** Sends an event to an actor (created from `input` on first use); resolves once its batch is written. */
  send(actor: string, kind: string, input: unknown, event: Event, opts: SendOptions = {}): Promise<AnyMachineSnapshot> {
    if (this.closed) return Promise.reject(new Error('the actor host is closed'));
    if (this.damaged) return Promise.reject(this.damaged);
    checkActorId(actor);
    if (!this.kinds[kind]) return Promise.reject(new Error(`unknown actor kind "${kind}"`));
    this.sent++;
    let item!: Pending;
    const answered = new Promise<AnyMachineSnapshot>((resolve, reject) => {
      item = { actor, kind, input, event, random: opts.random ?? 0, alongside: opts.alongside ?? NONE, state: null, resolve, reject };
    });
    this.queue.push(item);
    this.kick();
    return answered;
  }

  /** Answers a sender (each sent event is answered or refused exactly once: what `idle()` counts). */
  private answer(item: Pending, state: AnyMachineSnapshot): void {
    item.resolve(state);
    this.settle(1);
  }

  private refuse(item: Pending, err: unknown): void {
    item.reject(err);
    this.settle(1);
  }

  /** The current state of an actor, loading it if passivated; undefined if it never received an event. */
  async state(actor: string): Promise<AnyMachineSnapshot | undefined> {
    await this.idle();
    const live = this.live.get(actor);
    if (live) return live.state;
    const rec = (await this.store.snapshots.get(actor)) as SnapshotRecord | undefined;
    // A send may have loaded the actor while we read: memory wins. A read never inserts into memory, so
    // it cannot put an older snapshot over a newer state.
    const loaded = this.live.get(actor);
    if (loaded) return loaded.state;
    return rec && restoreSnapshot(this.kindOf(actor, rec), rec.state);
  }

  liveCount(): number {
    return this.live.size;
  }

  /**
   * Resolves when every event sent before the call (and every deadline fired by then) is settled. Later
   * sends do not hold it up, so it returns under steady traffic too.
   */
  async idle(): Promise<void> {
    if (this.deadlines.firing) await this.deadlines.firing;
    const target = this.sent;
    if (this.settled < target) await new Promise<void>((resolve) => this.idleWaiters.push({ target, resolve }));
    // A refused event settles before memory is rebuilt from the store.
    while (this.reloading) await this.reloading;
  }

  private settle(n: number): void {
    this.settled += n;
    if (this.idleWaiters.length === 0) return;
    const still: { target: number; resolve(): void }[] = [];
    for (const w of this.idleWaiters) (this.settled >= w.target ? w.resolve : () => still.push(w))();
    this.idleWaiters = still;
  }

  /** Stops accepting events, drains the queue, and writes the snapshots of actors that moved since theirs. */
  async close(): Promise<void> {
    this.closed = true;
    this.deadlines.stop();
    await this.idle();
    await this.checkpoints.writeAll(this.seq - 1, this.sync);
    this.live.clear();
  }

  private kick(): void {
    if (this.working) return;
    this.working = this.drain()
      .catch(async (err) => {
        // A checkpoint or passivation write failed: memory may be ahead of the store, so rebuild it.
        this.onError(err);
        await this.reload().catch((e) => this.onError(e));
      })
      .finally(() => {
        this.working = null;
        if (this.queue.length > 0) this.kick();
      });
  }

  /**
   * Computes the transitions of the next batch while the previous one is being written, so CPU and disk
   * overlap. A batch is written only after the one before it is durable, so the journal never has a gap.
   */
  private async drain(): Promise<void> {
    // Group commit: the events sent in this turn of the event loop (a call's RECEIVED and its quota
    // windows, an outcome and its in-flight release) share the first batch and its fsync.
    await new Promise<void>((resolve) => setImmediate(resolve));
    let writing: Promise<boolean> | null = null;
    try {
      while (this.queue.length > 0) {
        if (this.damaged) {
          for (const item of this.queue.splice(0)) this.refuse(item, this.damaged);
          break;
        }
        const batch = await this.compute(this.queue.splice(0, this.maxBatch));
        if (writing && !(await writing)) {
          // The previous write failed and this batch was computed on top of it: refuse it too, then
          // rebuild memory from the store (nothing else is computing now).
          for (const item of batch.done) this.refuse(item, new Error('an earlier journal write failed'));
          writing = null;
          await this.reload();
          continue;
        }
        writing = this.commit(batch);
        this.checkpoints.beginIfDue(this.seq - 1);
      }
      if (writing && !(await writing)) await this.reload();
      writing = null;
    } finally {
      // Whatever threw, the caller rebuilds memory from the store only once the batch being written has
      // landed (a commit never rejects): read earlier, the next seq would be one that batch already holds.
      if (writing) await writing;
    }
  }

  private async compute(items: Pending[]): Promise<Batch> {
    const ops: WriteOp[] = [];
    const done: Pending[] = [];
    // A failed batch read (one corrupt snapshot fails the whole getMany) falls back to reading each actor
    // alone, so it refuses only the events of the actor it concerns.
    const stored = await this.readSnapshots(items).catch(() => null);
    for (const item of items) {
      try {
        // An actor that was live when the batch was read may have been passivated since (by the batch
        // before, landing): then its snapshot is durable, and load() reads it.
        const actor =
          this.live.get(item.actor) ??
          (stored?.has(item.actor)
            ? this.loadFrom(item.actor, item.kind, item.input, stored.get(item.actor))
            : await this.load(item.actor, item.kind, item.input));
        this.touch(actor, item.kind);
        if (item.input !== undefined && actor.seq > 0 && !sameInput(actor.input, item.input)) {
          // The config changed since the actor was made (limits are read at start): journal the change.
          const configure = { ...item, event: { type: 'CONFIGURE', input: item.input }, random: 0 };
          this.apply(actor, configure, ops);
          actor.input = item.input;
        }
        item.state = this.apply(actor, item, ops);
        done.push(item);
        for (const a of item.alongside) {
          const sublevel = this.store[a.sublevel];
          ops.push(a.value === undefined ? { type: 'del', sublevel, key: a.key } : { type: 'put', sublevel, key: a.key, value: a.value });
        }
      } catch (err) {
        this.refuse(item, err);
      }
    }
    return { ops, done, evict: this.evictions(ops, done), snapshotted: this.checkpoints.sliceInto(ops) };
  }

  /**
   * Passivation rides in the batch: the snapshots of the least recently used actors beyond `maxLive`
   * are written with the batch's events, and the actors are forgotten once it lands. A separate write
   * after each batch cost a second fsync and stalled the pipeline on a busy node, where every new call
   * pushes an old one out. An actor that moves before the batch lands stays (its seq tells).
   */
  private evictions(ops: WriteOp[], done: Pending[]): [string, number][] {
    const moved = new Set(done.map((item) => item.actor));
    const evict: [string, number][] = [];
    // An actor this batch brought to a final state (a call that ended) takes no event any more: it goes
    // with the batch that ended it, rather than staying in memory until maxLive others push it out (a busy
    // provider's heap held 10,000 ended calls, all of them marked by every major GC).
    // One being passivated already by the batch being written goes with this one too: that batch keeps it
    // (an event of this one moved it), and nothing else would take it out of memory.
    for (const id of moved) {
      const actor = this.live.get(id);
      if (actor?.state.status === 'done') this.evict(actor, ops, evict);
    }
    let over = this.live.size - this.evicting.size - this.maxLive;
    for (const [id, actor] of this.live) {
      if (over <= 0) break;
      if (this.evicting.has(id) || moved.has(id)) continue;
      if (this.evict(actor, ops, evict)) over--;
    }
    return evict;
  }

  /** Adds `actor`'s passivation to a batch: its snapshot if memory is ahead of it; false if none could be made. */
  private evict(actor: Live, ops: WriteOp[], evict: [string, number][]): boolean {
    if (this.dirty.has(actor.id)) {
      const op = this.tryToSnapshot(actor);
      if (!op) return false;
      ops.push(op);
    }
    this.evicting.add(actor.id);
    evict.push([actor.id, actor.seq]);
    return true;
  }

  /** Writes one batch, forgets the actors it passivated, and answers its senders; false when the write failed. */
  private async commit({ ops, done, evict, snapshotted }: Batch): Promise<boolean> {
    try {
      if (ops.length) await this.store.write(ops, { sync: this.sync, link: true });
    } catch (err) {
      // Memory is now ahead of the store; the drain loop rebuilds it once nothing is computing.
      this.reloadPending();
      for (const item of done) this.refuse(item, err);
      return false;
    }
    for (const [id, seq] of snapshotted) if (this.live.get(id)?.seq === seq) this.dirty.delete(id);
    // A new deadline earlier than the armed timer moves it; a removed one lets the timer fire early and
    // find nothing due, which costs one index read. Read before the batch's actors leave memory (an ended
    // one among them).
    let earliest = Infinity;
    for (const item of done) earliest = Math.min(earliest, this.live.get(item.actor)?.deadline ?? Infinity);
    for (const [id, seq] of evict) {
      this.evicting.delete(id);
      // An event applied since (a later batch, computed while this one was written) keeps it in memory.
      if (this.live.get(id)?.seq !== seq) continue;
      this.live.delete(id);
      this.dirty.delete(id);
      this.stats.passivated++;
    }
    this.deadlines.written(earliest);
    for (const item of done) this.answer(item, item.state!);
    return true;
  }

  /** Marks memory as needing a rebuild, before the refused senders hear of it, so reads wait for it. */
  private reloadPending(): void {
    if (this.reloading) return;
    let done!: () => void;
    this.reloading = new Promise<void>((resolve) => (done = resolve));
    this.reloaded = done;
  }

  /** Rebuilds memory from the store after a failed write (see `idle`). */
  private async reload(): Promise<void> {
    this.reloadPending();
    try {
      await this.rebuild();
    } finally {
      const done = this.reloaded;
      this.reloading = null;
      done();
    }
  }

  private async rebuild(): Promise<void> {
    this.live.clear();
    this.dirty.clear();
    this.evicting.clear();
    this.checkpoints.reset();
    this.seq = await this.store.nextSeq();
    try {
      await this.recover();
    } catch (err) {
      // The journal read back after a failed write is damaged: never run on (memory is half rebuilt).
      if (err instanceof JournalDamagedError) this.damaged = err;
      throw err;
    }
    await this.deadlines.reset();
  }

  /** Marks an actor most recently used (Map order is the LRU order). */
  private touch(actor: Live, kind: string): void {
    if (actor.kind !== kind) throw new Error(`actor ${actor.id} is a ${actor.kind}, not a ${kind}`);
    this.live.delete(actor.id);
    this.live.set(actor.id, actor);
  }

  private apply(actor: Live, item: Pending, ops: WriteOp[]): AnyMachineSnapshot {
    const kind = this.kinds[actor.kind]!;
    const event = { ...item.event, at: item.event.at ?? this.clock.now() } as JournalEntry['event'];
    if (item.random > 0) event.rnd = randomBytes(item.random);
    const next = step(kind.machine, actor.state, event);
    if (next.status === 'error') throw new Error(`actor ${actor.id}: ${String((next as { error?: unknown }).error)}`);
    const seq = this.seq++;
    const entry: JournalEntry = { seq, actor: actor.id, kind: actor.kind, version: kind.version, event };
    if (actor.seq === 0) entry.input = actor.input;
    ops.push({ type: 'put', sublevel: this.store.journal, key: seqKey(seq), value: entry });
    const deadline = kind.deadline(next);
    deadlineOps(this.store, actor.id, actor.kind, actor.deadline, deadline, ops);
    actor.state = next;
    actor.seq = seq;
    actor.deadline = deadline;
    this.dirty.add(actor.id);
    this.checkpoints.counted();
    return next;
  }

  /** The actor's snapshot op, or null (reported) when it cannot be made: the batch's events still go. */
  private tryToSnapshot(actor: Live): WriteOp | null {
    try {
      return this.snapshotOp(actor);
    } catch (err) {
      this.onError(new Error(`actor ${actor.id}: its snapshot could not be made: ${(err as Error).message}`));
      return null;
    }
  }

  private snapshotOp(actor: Live): WriteOp {
    return snapshotOp(this.store, this.kinds[actor.kind]!, actor);
  }

  private async load(id: string, kind: string, input: unknown): Promise<Live> {
    const live = this.live.get(id);
    if (live) return live;
    const rec = (await this.store.snapshots.get(id)) as SnapshotRecord | undefined;
    return this.loadFrom(id, kind, input, rec);
  }

  /**
   * The stored snapshots of a batch's actors that are not in memory. A few (a new call and its windows)
   * are read synchronously: a read that LevelDB answers from memory or its bloom filters takes a few
   * microseconds, against ~40 µs of CPU and ~100 µs of latency for a thread-pool round trip on every call.
   * More are read in one getMany, so a batch of cold actors does not hold the event loop; one read per
   * actor, awaited in turn, left the CPU idle while a batch of new actors was computed.
   */
  private async readSnapshots(items: Pending[]): Promise<Map<string, SnapshotRecord | undefined>> {
    const missing = new Set<string>();
    for (const item of items) if (!this.live.has(item.actor)) missing.add(item.actor);
    const stored = new Map<string, SnapshotRecord | undefined>();
    if (missing.size === 0) return stored;
    if (missing.size <= SYNC_READS && this.store.snapshots.status === 'open') {
      for (const id of missing) stored.set(id, this.store.snapshots.getSync(id) as SnapshotRecord | undefined);
      return stored;
    }
    const ids = [...missing];
    const records = (await this.store.snapshots.getMany(ids)) as (SnapshotRecord | undefined)[];
    for (let i = 0; i < ids.length; i++) stored.set(ids[i]!, records[i]);
    return stored;
  }

  /** The actor in memory, else from its stored snapshot `rec`, else new from `input`. */
  private loadFrom(id: string, kind: string, input: unknown, rec: SnapshotRecord | undefined): Live {
    const loaded = this.live.get(id);
    if (loaded) return loaded;
    if (rec) {
      if (rec.kind !== kind) throw new Error(`actor ${id} is a ${rec.kind}, not a ${kind}`);
      return this.rehydrate(id, rec);
    }
    const state = initial(this.kinds[kind]!.machine, input);
    const created: Live = { id, kind, input, state, seq: 0, deadline: null };
    this.live.set(id, created);
    return created;
  }

  /** The kind of a stored snapshot, when this build has it at the snapshot's version (versions.ts). */
  private kindOf(id: string, rec: SnapshotRecord): ActorKind {
    const kind = kindAt(this.kinds, rec);
    if (!kind) throw unknownVersion(this.kinds, rec, `the snapshot of actor ${id} (as of #${rec.seq})`, this.store.dataDir);
    return kind;
  }

  /** Snapshots are current for every event up to the checkpoint, and recovery applies the rest. */
  private rehydrate(id: string, rec: SnapshotRecord): Live {
    const kind = this.kindOf(id, rec);
    const state = restoreSnapshot(kind, rec.state);
    const live: Live = { id, kind: rec.kind, input: rec.input, state, seq: rec.seq, deadline: kind.deadline(state) };
    this.live.set(id, live);
    return live;
  }

  /**
   * At start-up, after recovery: out of memory go the actors that ended (as after any batch, see
   * evictions: recovery loads those the journal names) and the least recently used past maxLive.
   */
  private async passivate(): Promise<void> {
    const ops: WriteOp[] = [];
    const evict: string[] = [];
    let over = this.live.size - this.maxLive;
    for (const [id, actor] of this.live) {
      if (over <= 0 && actor.state.status !== 'done') continue;
      over--;
      if (this.dirty.has(id)) ops.push(this.snapshotOp(actor));
      evict.push(id);
    }
    // Write first, then forget: until the snapshots are durable, memory is the only copy.
    if (ops.length) await this.store.write(ops, { sync: this.sync });
    for (const id of evict) {
      this.dirty.delete(id);
      this.live.delete(id);
    }
  }
}

/** Inputs are small plain records (limits from config); the same object is the common case. */
function sameInput(a: unknown, b: unknown): boolean {
  return a === b || isDeepStrictEqual(a, b);
}
