// The receiver's replay guard (WIRE §4): every message id is remembered until its message expires (an
// expired message is refused anyway), in LevelDB so a restart does not reopen the window.
import type { Store } from '../../store/db.js';
import { timeKey } from '../../store/db.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
/** Expiry index keys sort after every hex mid. */
const INDEX = '~';

export class ReplayGuard {
  /** Mids being checked right now, so two copies arriving together cannot both pass. */
  private readonly checking = new Set<string>();
  /** Mids taken since start (bounded), checked before LevelDB. */
  private readonly recent = new Set<string>();

  private remember(key: string): void {
    if (this.recent.size >= 100_000) this.recent.clear();
    this.recent.add(key);
  }

  constructor(private readonly store: Store) {}

  /** True when `mid` was seen before; otherwise records it until `exp`. */
  async seen(mid: Uint8Array, exp: number): Promise<boolean> {
    const key = hex(mid);
    if (this.checking.has(key)) return true;
    this.checking.add(key);
    try {
      if (this.recent.has(key) || (await this.store.mids.get(key)) !== undefined) return true;
      // Remembered in memory at once (so a copy arriving now is caught) and written without waiting:
      // LevelDB applies writes in the order they are issued, and every effect of this message is a later
      // (synced) write, so whatever it did is never on disk without its mid.
      this.remember(key);
      void this.store.mids
        .batch([
          { type: 'put', key, value: exp },
          { type: 'put', key: `${INDEX}${timeKey(exp)}!${key}`, value: 1 },
        ])
        .catch(() => this.recent.delete(key));
      return false;
    } finally {
      this.checking.delete(key);
    }
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
