// The actor host (SPEC §14). Machines run as pure xstate transitions over snapshots kept in memory (LRU,
// bounded) and in LevelDB. Each event is stamped (time, optional random bytes), its transition computed,
// and journal entry + index + deadline + snapshot written in one atomic batch before anyone sees the new
// state. Deadlines live in machine context and in an index, so one timer re-arms them after a restart.
import { randomBytes } from 'node:crypto';
import type { AnyMachineSnapshot } from 'xstate';
import { step, initial } from './pure.js';
import { Store, seqKey, actorKey, deadlineKey, timeKey, checkActorId, type JournalEntry, type SnapshotRecord } from '../../store/db.js';
import { KINDS, type ActorKind } from './kinds.js';
import { systemClock, type Clock } from './clock.js';

export interface HostOptions {
  clock?: Clock;
  kinds?: Record<string, ActorKind>;
  /** Actors kept in memory; the least recently used beyond this are passivated to LevelDB. */
  maxLive?: number;
  /** A snapshot is written with an actor's first event and then every this many events. */
  snapshotEvery?: number;
  /** Events written per LevelDB batch at most. */
  maxBatch?: number;
  /** fsync each batch: survives power loss, not just a process kill. */
  sync?: boolean;
}

export interface SendOptions {
  /** Random bytes the host draws and journals in the event as `rnd`, so replay sees the same ones. */
  random?: number;
}

type Event = { type: string; at?: number; [key: string]: unknown };

interface Live {
  id: string;
  kind: string;
  input: unknown;
  state: AnyMachineSnapshot;
  /** Seq of the last applied event; 0 for an actor with no journaled event yet. */
  seq: number;
  deadline: number | null;
  sinceSnapshot: number;
  hasSnapshot: boolean;
}

interface Pending {
  actor: string;
  kind: string;
  input: unknown;
  event: Event;
  random: number;
  resolve(state: AnyMachineSnapshot): void;
  reject(err: unknown): void;
}

type Op = { type: 'put'; sublevel: unknown; key: string; value: unknown } | { type: 'del'; sublevel: unknown; key: string };

export class ActorHost {
  private readonly clock: Clock;
  private readonly kinds: Record<string, ActorKind>;
  private readonly maxLive: number;
  private readonly snapshotEvery: number;
  private readonly maxBatch: number;
  private readonly sync: boolean;
  private readonly live = new Map<string, Live>();
  private queue: Pending[] = [];
  private working: Promise<void> | null = null;
  private idleWaiters: (() => void)[] = [];
  private seq = 1;
  private timer: { cancel(): void } | null = null;
  private timerAt = Infinity;
  private closed = false;
  private firing: Promise<void> | null = null;

  private constructor(readonly store: Store, opts: HostOptions) {
    this.clock = opts.clock ?? systemClock;
    this.kinds = opts.kinds ?? KINDS;
    this.maxLive = opts.maxLive ?? 10_000;
    this.snapshotEvery = opts.snapshotEvery ?? 100;
    this.maxBatch = opts.maxBatch ?? 4096;
    this.sync = opts.sync ?? false;
  }

  /** Opens the host on a store and re-arms every pending deadline (overdue ones fire at once). */
  static async start(store: Store, opts: HostOptions = {}): Promise<ActorHost> {
    const host = new ActorHost(store, opts);
    host.seq = await store.nextSeq();
    await host.rearm();
    return host;
  }

  /** Sends an event to an actor (created from `input` on first use); resolves once it is durable. */
  send(actor: string, kind: string, input: unknown, event: Event, opts: SendOptions = {}): Promise<AnyMachineSnapshot> {
    if (this.closed) return Promise.reject(new Error('the actor host is closed'));
    checkActorId(actor);
    if (!this.kinds[kind]) return Promise.reject(new Error(`unknown actor kind "${kind}"`));
    return new Promise((resolve, reject) => {
      this.queue.push({ actor, kind, input, event, random: opts.random ?? 0, resolve, reject });
      this.kick();
    });
  }

  /** The current state of an actor, loading it if passivated; undefined if it never received an event. */
  async state(actor: string): Promise<AnyMachineSnapshot | undefined> {
    await this.idle();
    const live = this.live.get(actor);
    if (live) return live.state;
    const rec = (await this.store.snapshots.get(actor)) as SnapshotRecord | undefined;
    return rec ? (await this.rehydrate(actor, rec)).state : undefined;
  }

  liveCount(): number {
    return this.live.size;
  }

  /** Resolves when every queued event (and every fired deadline) is durable and applied. */
  async idle(): Promise<void> {
    while (this.firing || this.working || this.queue.length > 0) {
      if (this.firing) await this.firing;
      else await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
    }
  }

  /** Stops accepting events, drains the queue, and writes the snapshots of actors that moved since theirs. */
  async close(): Promise<void> {
    this.closed = true;
    await this.idle();
    this.timer?.cancel();
    this.timer = null;
    const ops: Op[] = [];
    for (const a of this.live.values()) if (a.sinceSnapshot > 0) ops.push(this.snapshotOp(a));
    if (ops.length) await this.store.db.batch(ops as never, { sync: this.sync });
    this.live.clear();
  }

  private kick(): void {
    if (this.working) return;
    this.working = this.drain().finally(() => {
      this.working = null;
      if (this.queue.length > 0) return this.kick();
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const w of waiters) w();
    });
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      await this.process(this.queue.splice(0, this.maxBatch));
      await this.passivate();
    }
  }

  private async process(items: Pending[]): Promise<void> {
    const ops: Op[] = [];
    const before = new Map<string, Live>();
    const done: [Pending, AnyMachineSnapshot][] = [];
    const firstSeq = this.seq;
    for (const item of items) {
      try {
        const actor = await this.load(item.actor, item.kind, item.input);
        if (!before.has(actor.id)) before.set(actor.id, { ...actor });
        done.push([item, this.apply(actor, item, ops)]);
      } catch (err) {
        item.reject(err);
      }
    }
    try {
      if (ops.length) await this.store.db.batch(ops as never, { sync: this.sync });
    } catch (err) {
      // Nothing was written: put the touched actors back as they were and refuse every event.
      for (const [id, prev] of before) this.live.set(id, prev);
      this.seq = firstSeq;
      for (const [item] of done) item.reject(err);
      return;
    }
    // A new deadline earlier than the armed timer moves it; a removed one lets the timer fire early and
    // find nothing due, which costs one index read.
    const earliest = Math.min(...done.map(([item]) => this.live.get(item.actor)?.deadline ?? Infinity));
    if (earliest < this.timerAt && !this.closed) this.armAt(earliest);
    for (const [item, state] of done) item.resolve(state);
  }

  private apply(actor: Live, item: Pending, ops: Op[]): AnyMachineSnapshot {
    const kind = this.kinds[actor.kind]!;
    const event = { ...item.event, at: item.event.at ?? this.clock.now() } as JournalEntry['event'];
    if (item.random > 0) event.rnd = randomBytes(item.random);
    const next = step(kind.machine, actor.state, event);
    if (next.status === 'error') throw new Error(`actor ${actor.id}: ${String((next as { error?: unknown }).error)}`);
    const seq = this.seq++;
    const entry: JournalEntry = { seq, actor: actor.id, kind: actor.kind, event };
    if (actor.seq === 0) entry.input = actor.input;
    ops.push({ type: 'put', sublevel: this.store.journal, key: seqKey(seq), value: entry });
    ops.push({ type: 'put', sublevel: this.store.actorIndex, key: actorKey(actor.id, seq), value: 0 });
    const deadline = kind.deadline(next);
    if (deadline !== actor.deadline) {
      if (actor.deadline !== null) ops.push({ type: 'del', sublevel: this.store.deadlines, key: deadlineKey(actor.deadline, actor.id) });
      if (deadline !== null) ops.push({ type: 'put', sublevel: this.store.deadlines, key: deadlineKey(deadline, actor.id), value: actor.kind });
    }
    actor.state = next;
    actor.seq = seq;
    actor.deadline = deadline;
    actor.sinceSnapshot++;
    if (!actor.hasSnapshot || actor.sinceSnapshot >= this.snapshotEvery) ops.push(this.snapshotOp(actor));
    return next;
  }

  private snapshotOp(actor: Live): Op {
    const kind = this.kinds[actor.kind]!;
    const record: SnapshotRecord = {
      kind: actor.kind,
      seq: actor.seq,
      input: actor.input,
      state: kind.machine.getPersistedSnapshot(actor.state),
      deadline: actor.deadline,
    };
    actor.sinceSnapshot = 0;
    actor.hasSnapshot = true;
    return { type: 'put', sublevel: this.store.snapshots, key: actor.id, value: record };
  }

  private async load(id: string, kind: string, input: unknown): Promise<Live> {
    const live = this.live.get(id);
    if (live) {
      this.live.delete(id);
      this.live.set(id, live);
      if (live.kind !== kind) throw new Error(`actor ${id} is a ${live.kind}, not a ${kind}`);
      return live;
    }
    const rec = (await this.store.snapshots.get(id)) as SnapshotRecord | undefined;
    if (rec) {
      if (rec.kind !== kind) throw new Error(`actor ${id} is a ${rec.kind}, not a ${kind}`);
      return this.rehydrate(id, rec);
    }
    const state = initial(this.kinds[kind]!.machine, input);
    const created: Live = { id, kind, input, state, seq: 0, deadline: null, sinceSnapshot: 0, hasSnapshot: false };
    this.live.set(id, created);
    return created;
  }

  /** Snapshot, then the actor's journal entries after it (a crash may have left the snapshot behind). */
  private async rehydrate(id: string, rec: SnapshotRecord): Promise<Live> {
    const kind = this.kinds[rec.kind];
    if (!kind) throw new Error(`actor ${id} has unknown kind "${rec.kind}"`);
    let state = restoreSnapshot(kind, rec.state);
    let seq = rec.seq;
    let since = 0;
    for await (const key of this.store.actorIndex.keys({ gt: actorKey(id, rec.seq), lt: `${id}!~` })) {
      const entry = (await this.store.journal.get(key.slice(id.length + 1))) as JournalEntry;
      state = step(kind.machine, state, entry.event);
      seq = entry.seq;
      since++;
    }
    const live: Live = { id, kind: rec.kind, input: rec.input, state, seq, deadline: kind.deadline(state), sinceSnapshot: since, hasSnapshot: true };
    this.live.set(id, live);
    return live;
  }

  private async passivate(): Promise<void> {
    if (this.live.size <= this.maxLive) return;
    const ops: Op[] = [];
    for (const [id, actor] of this.live) {
      if (this.live.size <= this.maxLive) break;
      if (actor.sinceSnapshot > 0) ops.push(this.snapshotOp(actor));
      this.live.delete(id);
    }
    if (ops.length) await this.store.db.batch(ops as never, { sync: this.sync });
  }

  /** Arms one timer for the earliest pending deadline in the index. */
  private async rearm(): Promise<void> {
    let earliest = Infinity;
    for await (const key of this.store.deadlines.keys({ limit: 1 })) earliest = Number(key.slice(0, key.indexOf('!')));
    if (earliest !== this.timerAt) this.armAt(earliest);
  }

  private armAt(at: number): void {
    this.timer?.cancel();
    this.timerAt = at;
    this.timer = at === Infinity ? null : this.clock.at(at, () => this.onDeadline());
  }

  private onDeadline(): void {
    const firing = this.fireDeadlines().finally(() => {
      if (this.firing === firing) this.firing = null;
    });
    this.firing = firing;
  }

  private async fireDeadlines(): Promise<void> {
    this.timer = null;
    this.timerAt = Infinity;
    if (this.closed) return;
    const due: [string, string][] = [];
    for await (const [key, kind] of this.store.deadlines.iterator({ lt: `${timeKey(this.clock.now() + 1)}` })) {
      due.push([key.slice(key.indexOf('!') + 1), kind as string]);
    }
    const sends = due.map(([actor, kind]) => this.send(actor, kind, undefined, { type: 'TICK' }).catch(() => {}));
    await Promise.all(sends);
    await this.rearm();
  }
}

export function restoreSnapshot(kind: ActorKind, persisted: unknown): AnyMachineSnapshot {
  const p = persisted as { value: unknown; context: unknown };
  return kind.machine.resolveState({ value: p.value as never, context: p.context as never });
}
