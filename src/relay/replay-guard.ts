// The receiver's replay guard (WIRE §4): every message id is remembered until its message expires (an
// expired message is refused anyway), in LevelDB so a restart does not reopen the window.
//
// Mail kept at the hub (issue 19) is pushed again until the node acknowledges it, and the node
// acknowledges a message only once its handling is durable. So a mid is written only then: seen() takes
// it in memory (a copy arriving meanwhile is a replay), done() says its handling is durable, and commit(),
// called before each batch of acknowledgements leaves, writes the mids done since, synced. A node that
// stops (or crashes) before that has none of them on disk; the hub still keeps their envelopes, and the
// copies it pushes again are taken as new. The handlers make such a second run harmless (a task id seen
// before is answered, never run twice). Writing the mid before handling, as this guard once did (marked
// pending, and forgotten at the next start unless its handling had become durable), came to the same
// state on disk after any crash, and cost each message a write and a wait for it before its handler ran
// (timed inside both nodes in bench/calls, 32 calls at once: 3–3.5 ms at the median on each). Pending
// marks such a guard left (`~p<mid>`) are still forgotten, with their mids, at start.
//
// The bound. Messages may live 7 days (MAX_MESSAGE_TTL_MS), so the guard keeps at most `bound` mids
// (1,000,000 by default; measured, about 130 bytes each on disk with their indexes: ~130 MB at the bound,
// counted in ~2.5 s at start). A node holds that many only in a flood: 1.6 week-long messages (text
// tasks) a second for a week, or 1,100 calls a second for their 15 minutes. Past the bound the oldest-sent
// mids are forgotten, and the newest `ts` among them becomes the floor (`~floor`, written in the same
// batch): from then on a message sent at or before the floor is refused as a possible replay. A replay is
// therefore never accepted; what a flood costs is that old mail (sent at or before the floor) is refused
// and acknowledged, which its senders see as no answer. The floor never goes down; it stops mattering
// once MAX_MESSAGE_TTL_MS has passed (every message sent before it has expired).
import type { Store, WriteOp } from '../../store/db.js';
import { timeKey } from '../../store/db.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
/** Index keys sort after every hex mid; the expiry index's digits sort before `~f`, `~p` and `~t`. */
const INDEX = '~';
const SENT = '~t';
const PENDING = '~p';
const FLOOR = '~floor';
/** The mids the guard keeps at most (see the bound above). */
export const MAX_MIDS = 1_000_000;
/** Past the bound, this many more are forgotten at once, so the work is not done again for every message. */
const FORGET_SLACK = 0.01;
/** Done mids are written at most this long after done() when no acknowledgement asks for it sooner. */
const COMMIT_MS = 1000;

export class ReplayGuard {
  /** Mids written (bounded), checked before LevelDB. */
  private readonly recent = new Set<string>();
  /** Mids taken and not written yet, with what their records hold: replays meanwhile (never cleared before written). */
  private readonly taken = new Map<string, { exp: number; ts: number }>();
  /** Mids whose handling is durable, written by the next commit(). */
  private done_: string[] = [];
  /** The last commit() (each one writes after the one before it: an acknowledgement waits for every mid done before it). */
  private committed: Promise<void> = Promise.resolve();
  /** A commit() due without acknowledgements (a hub that takes none), so done mids do not wait in memory. */
  private commitTimer: NodeJS.Timeout | undefined;
  /** Messages sent at or before this are refused (see the bound); -1 while nothing was forgotten. */
  private floor = -1;
  /** Mids kept (counted at recover(); an estimate until then, which only delays forgetting). */
  private count = 0;
  private forgetting: Promise<void> | null = null;
  private readonly bound: number;

  private remember(key: string): void {
    if (this.recent.size >= 100_000) this.recent.clear();
    this.recent.add(key);
  }

  constructor(
    private readonly store: Store,
    opts: { bound?: number } = {},
  ) {
    this.bound = opts.bound ?? MAX_MIDS;
  }

  /**
   * At start, before any message is taken: reads the floor and the count, and forgets the mids an earlier
   * version of this guard marked pending (their handling never became durable), so their messages pushed
   * again are taken. Returns how many.
   */
  async recover(): Promise<number> {
    const mids = this.store.mids;
    this.floor = ((await mids.get(FLOOR)) as number | undefined) ?? -1;
    const pending: string[] = [];
    for await (const key of mids.keys({ gte: PENDING, lt: `${PENDING}~` })) pending.push(key.slice(PENDING.length));
    const ops: WriteOp[] = [];
    for (const mid of pending) {
      const rec = (await mids.get(mid)) as number | undefined;
      ops.push({ type: 'del', sublevel: mids, key: `${PENDING}${mid}` }, { type: 'del', sublevel: mids, key: mid });
      this.recent.delete(mid);
      if (rec === undefined) continue;
      const sent = (await mids.get(`${INDEX}${timeKey(rec)}!${mid}`)) as number | undefined;
      ops.push({ type: 'del', sublevel: mids, key: `${INDEX}${timeKey(rec)}!${mid}` });
      if (typeof sent === 'number') ops.push({ type: 'del', sublevel: mids, key: `${SENT}${timeKey(sent)}!${mid}` });
    }
    if (ops.length) await this.store.write(ops, { sync: true });
    let count = 0;
    for await (const _ of mids.keys({ gte: SENT, lt: `${SENT}~` })) count++;
    this.count = count;
    return pending.length;
  }

  /**
   * True when `mid` was seen before (taken since start, or written), or its message was sent (`ts`) at or
   * before the floor; otherwise takes it until done() or release(), and its record (kept until `exp`) is
   * written by the commit() after done().
   */
  async seen(mid: Uint8Array, exp: number, ts = exp): Promise<boolean> {
    if (ts <= this.floor) return true;
    const key = hex(mid);
    // Memory first (a copy arriving now is caught), then the store, read synchronously: a lookup that
    // almost always misses costs microseconds, against a thread-pool round trip for the async form.
    if (this.recent.has(key) || this.taken.has(key)) return true;
    const mids = this.store.mids;
    // Taken before any wait: a copy arriving while the store is still opening (just after start) is a replay.
    this.taken.set(key, { exp, ts });
    let found: boolean;
    try {
      found = (mids.status === 'open' ? mids.getSync(key) : await mids.get(key)) !== undefined;
    } catch (err) {
      this.taken.delete(key);
      throw err;
    }
    if (found) this.taken.delete(key);
    return found;
  }

  /** The handling of `mid`'s message is durable: its record is written by the next commit(). */
  done(mid: Uint8Array): void {
    this.done_.push(hex(mid));
    // Acknowledgements call commit() within 100 ms; with none (a hub that takes none), this one does.
    if (this.commitTimer) return;
    this.commitTimer = setTimeout(() => {
      this.commitTimer = undefined;
      if (this.done_.length > 0) this.commit().catch(() => {});
    }, COMMIT_MS);
    this.commitTimer.unref();
  }

  /**
   * The handling of `mid`'s message failed: the mid is forgotten (nothing of it was written), so the copy
   * the hub pushes again (it was not acknowledged) is taken as new.
   */
  release(mid: Uint8Array): void {
    this.taken.delete(hex(mid));
  }

  /**
   * Writes the records of the mids done since the last commit, synced, after every earlier commit: the
   * one fsync also makes every earlier unsynced write of the store durable (LevelDB appends them all to
   * the same log), the handlers' records included. The messenger calls it before acknowledging messages
   * to the hub. Mids whose write failed are written by the next commit (they stay replays meanwhile).
   */
  commit(): Promise<void> {
    const next = this.committed.catch(() => {}).then(() => this.writeDone());
    this.committed = next;
    return next;
  }

  private async writeDone(): Promise<void> {
    const done = this.done_;
    this.done_ = [];
    const mids = this.store.mids;
    const ops: WriteOp[] = [];
    const written: string[] = [];
    for (const key of done) {
      const taken = this.taken.get(key);
      if (!taken) continue;
      written.push(key);
      ops.push(
        { type: 'put', sublevel: mids, key, value: taken.exp },
        { type: 'put', sublevel: mids, key: `${INDEX}${timeKey(taken.exp)}!${key}`, value: taken.ts },
        { type: 'put', sublevel: mids, key: `${SENT}${timeKey(taken.ts)}!${key}`, value: taken.exp },
      );
    }
    // A put, so that there is something to sync even when no mid is done.
    ops.push({ type: 'put', sublevel: mids, key: '~synced', value: 1 });
    try {
      await this.store.write(ops, { sync: true });
    } catch (err) {
      this.done_.unshift(...done);
      throw err;
    }
    for (const key of written) {
      this.taken.delete(key);
      this.remember(key);
    }
    this.count += written.length;
    if (this.count > this.bound) void this.forgetOldest();
  }

  /**
   * Forgets the oldest-sent mids past the bound, raising the floor over them (one run at a time). It runs
   * after commits only, so after recover(): no pending mark is left to delete with them.
   */
  private forgetOldest(): Promise<void> {
    this.forgetting ??= (async () => {
      const mids = this.store.mids;
      const excess = this.count - this.bound + Math.ceil(this.bound * FORGET_SLACK);
      const ops: WriteOp[] = [];
      let floor = this.floor;
      let n = 0;
      for await (const [key, exp] of mids.iterator({ gte: SENT, lt: `${SENT}~`, limit: excess })) {
        const bang = key.indexOf('!');
        const mid = key.slice(bang + 1);
        floor = Math.max(floor, Number(key.slice(SENT.length, bang)));
        ops.push(
          { type: 'del', sublevel: mids, key },
          { type: 'del', sublevel: mids, key: mid },
          { type: 'del', sublevel: mids, key: `${INDEX}${timeKey(exp as number)}!${mid}` },
        );
        n++;
      }
      if (n === 0) return;
      // The floor is written with the deletions: no moment on disk has a mid gone and its floor not there.
      ops.push({ type: 'put', sublevel: mids, key: FLOOR, value: floor });
      await this.store.write(ops, { sync: true });
      this.floor = floor;
      this.count -= n;
    })().finally(() => (this.forgetting = null));
    return this.forgetting;
  }

  /** Forgets the mids of messages expired before `now`; returns how many. */
  async prune(now: number): Promise<number> {
    const mids = this.store.mids;
    const ops: WriteOp[] = [];
    let n = 0;
    // The expiry index: `~<16 digits>!<mid>` (below `~f…`, `~p…`, `~t…`), its value the send time (1 in
    // records written before the bound existed: those have no send-time entry). A pending mark an earlier
    // guard left goes too: the node's start prunes before recover() reads those marks.
    for await (const [key, ts] of mids.iterator({ gte: INDEX, lt: `${INDEX}${timeKey(now)}` })) {
      const mid = key.slice(key.indexOf('!') + 1);
      ops.push(
        { type: 'del', sublevel: mids, key },
        { type: 'del', sublevel: mids, key: mid },
        { type: 'del', sublevel: mids, key: `${PENDING}${mid}` },
      );
      if (typeof ts === 'number' && ts > 1) ops.push({ type: 'del', sublevel: mids, key: `${SENT}${timeKey(ts)}!${mid}` });
      n++;
    }
    if (ops.length) await this.store.write(ops);
    this.count = Math.max(0, this.count - n);
    return n;
  }
}
