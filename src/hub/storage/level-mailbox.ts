// The embedded backend's mailboxes (src/hub/storage/types.ts MailboxStore, issue 19): sealed envelopes
// kept in the hub's LevelDB for their recipient until it acknowledges them or they expire. Three
// sublevels: `mail` (`<to>!<seq>` → {id, bytes, expires}: a recipient's envelopes, oldest first),
// `mail-ids` (`<to>!<id>` → {seq, n, expires}: acks and duplicates find an envelope by its id) and
// `mail-exp` (`<expires>!<to>!<seq>` → id: the sweep finds expired ones without reading any envelope).
// What is kept is what the hub was given: the recipient and the ciphertext, never who sent it (WIRE §4).
//
// This backend serves one process (LevelDB allows no other), so the bounds are checked against counters
// in memory, built from `mail-ids` at first use, and each recipient's changes run one at a time (a
// KeyedSerial): a put checks and reserves its room before its first await, so no two puts pass a bound
// together. Writes are unsynced: a crash of the hub's process loses nothing (LevelDB has written the
// batch to its log before the put resolves), but a power loss may lose the last moments of accepted mail.
// That is the same promise as any relay that answers before an fsync; a synced write per envelope would
// cost the relay most of its throughput.
import type { AbstractSublevel } from 'abstract-level';
import type { Level } from 'level';
import { msgpack } from '../../../store/codec.js';
import { timeKey } from '../../../store/db.js';
import { KeyedSerial } from '../../runtime/serial.js';
import type { Mail, MailboxLimits, MailboxStore } from './types.js';

type Sub = AbstractSublevel<Level<string, unknown>, string | Buffer | Uint8Array, string, unknown>;

interface Kept {
  id: string;
  bytes: Uint8Array;
  expires: number;
}

interface IdRecord {
  seq: string;
  /** The envelope's size in bytes. */
  n: number;
  expires: number;
}

interface Count {
  envelopes: number;
  bytes: number;
}

const SEQ_WIDTH = 16;
const seqKey = (seq: number) => seq.toString().padStart(SEQ_WIDTH, '0');
/** Expired envelopes deleted per batch by the sweep. */
const SWEEP_BATCH = 1000;

const asBytes = (b: Uint8Array) => new Uint8Array(b.buffer, b.byteOffset, b.byteLength);

export class LevelMailbox implements MailboxStore {
  private readonly mail: Sub;
  private readonly ids: Sub;
  private readonly expiries: Sub;
  /** Each recipient's puts and deletes, one at a time (read, check the bounds, write). */
  private readonly serial = new KeyedSerial();
  /** Per recipient and in all: what is kept, and room reserved by puts being written. */
  private readonly counts = new Map<string, Count>();
  private readonly total: Count = { envelopes: 0, bytes: 0 };
  private lastSeq = 0;
  private loaded: Promise<void> | null = null;

  constructor(private readonly db: Level<string, unknown>) {
    const sub = (name: string) => db.sublevel<string, unknown>(name, { valueEncoding: msgpack }) as Sub;
    this.mail = sub('mail');
    this.ids = sub('mail-ids');
    this.expiries = sub('mail-exp');
  }

  /** The counters and the last seq, from `mail-ids` (small records: no envelope is read). */
  private load(): Promise<void> {
    this.loaded ??= (async () => {
      for await (const [key, value] of this.ids.iterator()) {
        const rec = value as IdRecord;
        this.count(key.slice(0, key.lastIndexOf('!')), 1, rec.n);
        this.lastSeq = Math.max(this.lastSeq, Number(rec.seq));
      }
    })();
    return this.loaded;
  }

  private count(to: string, envelopes: number, bytes: number): void {
    const c = this.counts.get(to) ?? { envelopes: 0, bytes: 0 };
    c.envelopes += envelopes;
    c.bytes += bytes;
    if (c.envelopes <= 0) this.counts.delete(to);
    else this.counts.set(to, c);
    this.total.envelopes += envelopes;
    this.total.bytes += bytes;
  }

  private room(to: string, n: number, limits: MailboxLimits): boolean {
    const c = this.counts.get(to) ?? { envelopes: 0, bytes: 0 };
    return c.envelopes + 1 <= limits.perRecipient && c.bytes + n <= limits.perRecipientBytes && this.total.bytes + n <= limits.totalBytes;
  }

  async put(to: string, id: string, bytes: Uint8Array, expires: number, limits: MailboxLimits): Promise<'kept' | 'full'> {
    await this.load();
    return this.serial.run(to, async () => {
      const known = (await this.ids.get(`${to}!${id}`)) as IdRecord | undefined;
      if (known) {
        // The same envelope (its id is its bytes' hash) is kept already: kept as long as either copy asks.
        if (expires > known.expires) await this.extend(to, id, known, expires);
        return 'kept';
      }
      const n = bytes.byteLength;
      if (!this.room(to, n, limits)) return 'full';
      // Reserved before the write's await: another recipient's put checks the total against it.
      this.count(to, 1, n);
      const seq = seqKey(++this.lastSeq);
      try {
        await this.db.batch([
          { type: 'put', sublevel: this.mail, key: `${to}!${seq}`, value: { id, bytes: Buffer.from(bytes), expires } },
          { type: 'put', sublevel: this.ids, key: `${to}!${id}`, value: { seq, n, expires } },
          { type: 'put', sublevel: this.expiries, key: `${timeKey(expires)}!${to}!${seq}`, value: id },
        ] as never);
      } catch (err) {
        this.count(to, -1, -n);
        throw err;
      }
      return 'kept';
    });
  }

  /** A kept envelope's expiry moved later (its index entry with it). */
  private async extend(to: string, id: string, rec: IdRecord, expires: number): Promise<void> {
    const kept = (await this.mail.get(`${to}!${rec.seq}`)) as Kept | undefined;
    if (!kept) return;
    await this.db.batch([
      { type: 'put', sublevel: this.mail, key: `${to}!${rec.seq}`, value: { ...kept, expires } },
      { type: 'put', sublevel: this.ids, key: `${to}!${id}`, value: { ...rec, expires } },
      { type: 'del', sublevel: this.expiries, key: `${timeKey(rec.expires)}!${to}!${rec.seq}` },
      { type: 'put', sublevel: this.expiries, key: `${timeKey(expires)}!${to}!${rec.seq}`, value: id },
    ] as never);
  }

  async list(to: string, now: number): Promise<Mail[]> {
    const out: Mail[] = [];
    // `!` sorts below every seq digit and `~` above: exactly this recipient's keys.
    for await (const value of this.mail.values({ gt: `${to}!`, lt: `${to}!~` })) {
      const kept = value as Kept;
      if (kept.expires > now) out.push({ id: kept.id, bytes: asBytes(kept.bytes) });
    }
    return out;
  }

  async ack(to: string, ids: string[]): Promise<number> {
    if (ids.length === 0) return 0;
    await this.load();
    return this.serial.run(to, () => this.remove(to, [...new Set(ids)]));
  }

  /**
   * Deletes the named envelopes of `to` that are kept (run inside `to`'s turn), with `expiredAt` only those
   * expired then (a copy sent again may have moved an expiry later since the sweep read it); how many went.
   */
  private async remove(to: string, ids: string[], expiredAt = Number.POSITIVE_INFINITY): Promise<number> {
    const recs = (await this.ids.getMany(ids.map((id) => `${to}!${id}`))) as (IdRecord | undefined)[];
    const ops: unknown[] = [];
    let bytes = 0;
    let gone = 0;
    recs.forEach((rec, i) => {
      if (!rec || rec.expires > expiredAt) return;
      ops.push(
        { type: 'del', sublevel: this.mail, key: `${to}!${rec.seq}` },
        { type: 'del', sublevel: this.ids, key: `${to}!${ids[i]}` },
        { type: 'del', sublevel: this.expiries, key: `${timeKey(rec.expires)}!${to}!${rec.seq}` },
      );
      bytes += rec.n;
      gone++;
    });
    if (gone === 0) return 0;
    await this.db.batch(ops as never);
    this.count(to, -gone, -bytes);
    return gone;
  }

  async sweep(now: number): Promise<number> {
    await this.load();
    let swept = 0;
    for (;;) {
      // Expired at `now`: expires <= now, so every key below the next millisecond's.
      const due = new Map<string, string[]>();
      const keys: string[] = [];
      for await (const [key, id] of this.expiries.iterator({ lt: timeKey(now + 1), limit: SWEEP_BATCH })) {
        const rest = key.slice(key.indexOf('!') + 1);
        const to = rest.slice(0, rest.lastIndexOf('!'));
        due.set(to, [...(due.get(to) ?? []), id as string]);
        keys.push(key);
      }
      // Each recipient's in its turn: an ack racing with the sweep deletes (and uncounts) once.
      for (const [to, ids] of due) swept += await this.serial.run(to, () => this.remove(to, ids, now));
      // An index entry whose envelope an ack took meanwhile is gone already; any left over goes now, so
      // the next round cannot find it again.
      if (keys.length) await this.expiries.batch(keys.map((key) => ({ type: 'del' as const, key })));
      if (keys.length < SWEEP_BATCH) return swept;
    }
  }

  async size(): Promise<{ envelopes: number; bytes: number }> {
    await this.load();
    return { ...this.total };
  }
}
