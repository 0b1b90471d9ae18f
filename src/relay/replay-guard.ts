// The receiver's replay guard (WIRE §4): every message id is remembered until its message expires (an
// expired message is refused anyway), in LevelDB so a restart does not reopen the window.
import type { Store } from '../../store/db.js';
import { timeKey } from '../../store/db.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
/** Expiry index keys sort after every hex mid. */
const INDEX = '~';

export class ReplayGuard {
  /** Mids taken since start (bounded), checked before LevelDB. */
  private readonly recent = new Set<string>();
  /** Mids taken whose records are not written yet (never cleared before they are). */
  private readonly unwritten = new Set<string>();

  private remember(key: string): void {
    if (this.recent.size >= 100_000) this.recent.clear();
    this.recent.add(key);
  }

  constructor(private readonly store: Store) {}

  /**
   * True when `mid` was seen before; otherwise records it until `exp` and resolves once the record is
   * written (unsynced: the message's own effects are later, synced writes, so whatever it did is never
   * on disk without its mid). Messages arriving while a write is under way share the next one
   * (Store.writeGrouped).
   */
  async seen(mid: Uint8Array, exp: number): Promise<boolean> {
    const key = hex(mid);
    // Memory first (a copy arriving now is caught), then the store, read synchronously: a lookup that
    // almost always misses costs microseconds, against a thread-pool round trip for the async form.
    if (this.recent.has(key) || this.unwritten.has(key)) return true;
    const mids = this.store.mids;
    if (mids.status === 'open') {
      if (mids.getSync(key) !== undefined) return true;
    } else {
      // Still opening (just after start): the async read waits for it; a copy arriving meanwhile is a replay.
      this.unwritten.add(key);
      let found: boolean;
      try {
        found = (await mids.get(key)) !== undefined;
      } finally {
        this.unwritten.delete(key);
      }
      if (found) return true;
    }
    this.remember(key);
    this.unwritten.add(key);
    try {
      await this.store.writeGrouped([
        { type: 'put', sublevel: mids, key, value: exp },
        { type: 'put', sublevel: mids, key: `${INDEX}${timeKey(exp)}!${key}`, value: 1 },
      ]);
    } catch (err) {
      // Not recorded: forgotten, so a copy is checked against the store again — and this message is not
      // taken either (accepting it would let its effects be durable without its mid, and a copy run again).
      this.recent.delete(key);
      throw err;
    } finally {
      this.unwritten.delete(key);
    }
    return false;
  }

  /** Forgets the mids of messages expired before `now`; returns how many. */
  async prune(now: number): Promise<number> {
    const ops: { type: 'del'; key: string }[] = [];
    for await (const key of this.store.mids.keys({ gte: INDEX, lt: `${INDEX}${timeKey(now)}` })) {
      ops.push({ type: 'del', key }, { type: 'del', key: key.slice(key.indexOf('!') + 1) });
    }
    if (ops.length) await this.store.mids.batch(ops);
    return ops.length / 2;
  }
}
