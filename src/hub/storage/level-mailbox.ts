// The embedded backend's mailboxes (src/hub/storage/types.ts MailboxStore, issue 19): sealed envelopes
// kept in the hub's LevelDB for their recipient until it acknowledges them or they expire. Two
// sublevels: `mail` (`<to>!<seq>` → {id, bytes, expires}: a recipient's envelopes, oldest first) and
// `mail-exp` (`<expires>!<to>!<seq>` → {id, n}: the sweep finds expired ones without reading any
// envelope, and the index in memory is rebuilt from it). What is kept is what the hub was given: the
// recipient and the ciphertext, never who sent it (WIRE §4).
//
// This backend serves one process (LevelDB allows no other), so what is kept is also indexed in memory
// (per recipient: id → seq, size, expiry; ~150 bytes an envelope), read from `mail-exp` at first use: a
// put decides (a duplicate? room under the bounds?) and reserves before its first await, so no two puts
// pass a bound together, and neither a put nor an ack reads the disk. Writes arriving while one is under
// way share the next batch (as the node's Store.writeGrouped), in their stored form on the root database
// (store/db.ts writeRaw: abstract-level's per-op handling cost more than LevelDB's write). They are
// unsynced: a crash of the hub's process loses nothing (LevelDB has handed the batch to the OS before the
// put resolves), but a power loss may lose the last moments of accepted mail — the promise of any relay
// that answers before an fsync; a synced write per envelope would cost the relay most of its throughput.
import type { AbstractSublevel } from 'abstract-level';
import type { Level } from 'level';
import { msgpack, pack } from '../../../store/codec.js';
import { type RawOp, timeKey, writeRaw } from '../../../store/db.js';
import type { Mail, MailboxLimits, MailboxStore } from './types.js';

type Sub = AbstractSublevel<Level<string, unknown>, string | Buffer | Uint8Array, string, unknown>;

interface Kept {
  id: string;
  bytes: Uint8Array;
  expires: number;
}

/** One kept envelope in the index: where it is, its size and expiry, and its write while under way. */
interface Entry {
  seq: string;
  n: number;
  expires: number;
  written: Promise<void> | null;
  /** Being deleted (an ack or the sweep took it): not deleted twice. */
  leaving: boolean;
}

interface Box {
  entries: Map<string, Entry>;
  bytes: number;
}

const SEQ_WIDTH = 16;
const seqKey = (seq: number) => seq.toString().padStart(SEQ_WIDTH, '0');
/** Expired envelopes deleted per batch by the sweep. */
const SWEEP_BATCH = 1000;

const asBytes = (b: Uint8Array) => new Uint8Array(b.buffer, b.byteOffset, b.byteLength);

export class LevelMailbox implements MailboxStore {
  private readonly mail: Sub;
  private readonly expiries: Sub;
  private readonly boxes = new Map<string, Box>();
  private readonly total = { envelopes: 0, bytes: 0 };
  private lastSeq = 0;
  private loaded = false;
  private loading: Promise<void> | null = null;

  constructor(private readonly db: Level<string, unknown>) {
    const sub = (name: string) => db.sublevel<string, unknown>(name, { valueEncoding: msgpack }) as Sub;
    this.mail = sub('mail');
    this.expiries = sub('mail-exp');
  }

  /** The index, the counters and the last seq, from `mail-exp` (small records: no envelope is read). */
  private load(): Promise<void> {
    this.loading ??= (async () => {
      for await (const [key, value] of this.expiries.iterator()) {
        const { id, n } = value as { id: string; n: number };
        const first = key.indexOf('!');
        const last = key.lastIndexOf('!');
        const seq = key.slice(last + 1);
        this.index(key.slice(first + 1, last), id, { seq, n, expires: Number(key.slice(0, first)), written: null, leaving: false });
        this.lastSeq = Math.max(this.lastSeq, Number(seq));
      }
      this.loaded = true;
    })();
    return this.loading;
  }

  private index(to: string, id: string, e: Entry): void {
    let box = this.boxes.get(to);
    if (!box) {
      box = { entries: new Map(), bytes: 0 };
      this.boxes.set(to, box);
    }
    box.entries.set(id, e);
    box.bytes += e.n;
    this.total.envelopes++;
    this.total.bytes += e.n;
  }

  private unindex(to: string, id: string): void {
    const box = this.boxes.get(to);
    const e = box?.entries.get(id);
    if (!(box && e)) return;
    box.entries.delete(id);
    box.bytes -= e.n;
    if (box.entries.size === 0) this.boxes.delete(to);
    this.total.envelopes--;
    this.total.bytes -= e.n;
  }

  async put(
    to: string,
    id: string,
    bytes: Uint8Array,
    expires: number,
    limits: MailboxLimits,
    onKept?: () => void,
  ): Promise<'kept' | 'full'> {
    if (!this.loaded) await this.load();
    const known = this.boxes.get(to)?.entries.get(id);
    // Being deleted: its recipient acknowledged these very bytes, so a copy would be refused as a replay.
    if (known?.leaving) return 'kept';
    if (known) {
      // The same envelope (its id is its bytes' hash) is kept already: kept as long as either copy asks.
      if (known.written) await known.written;
      if (expires > known.expires) await this.extend(to, id, known, expires);
      return 'kept';
    }
    const n = bytes.byteLength;
    const box = this.boxes.get(to);
    const room =
      (box?.entries.size ?? 0) + 1 <= limits.perRecipient &&
      (box?.bytes ?? 0) + n <= limits.perRecipientBytes &&
      this.total.bytes + n <= limits.totalBytes;
    if (!room) return 'full';
    // Indexed (so counted) before the write's await: the next put checks the bounds against it.
    const seq = seqKey(++this.lastSeq);
    const entry: Entry = { seq, n, expires, written: null, leaving: false };
    this.index(to, id, entry);
    entry.written = this.write([
      this.put_(this.mail, `${to}!${seq}`, { id, bytes: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), expires }),
      this.put_(this.expiries, `${timeKey(expires)}!${to}!${seq}`, { id, n }),
    ]);
    onKept?.();
    try {
      await entry.written;
    } catch (err) {
      this.unindex(to, id);
      throw err;
    } finally {
      entry.written = null;
    }
    return 'kept';
  }

  /** A kept envelope's expiry moved later (its index entry with it). */
  private async extend(to: string, id: string, e: Entry, expires: number): Promise<void> {
    const kept = (await this.mail.get(`${to}!${e.seq}`)) as Kept | undefined;
    if (!kept || e.leaving) return;
    const before = e.expires;
    e.expires = expires;
    await this.write([
      this.put_(this.mail, `${to}!${e.seq}`, { ...kept, expires }),
      this.del_(this.expiries, `${timeKey(before)}!${to}!${e.seq}`),
      this.put_(this.expiries, `${timeKey(expires)}!${to}!${e.seq}`, { id, n: e.n }),
    ]);
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
    if (!this.loaded) await this.load();
    return this.remove(to, [...new Set(ids)]);
  }

  /**
   * Deletes the named envelopes of `to` that are kept, with `expiredAt` only those expired then (a copy
   * sent again may have moved an expiry later since the sweep read it); how many went.
   */
  private async remove(to: string, ids: string[], expiredAt = Number.POSITIVE_INFINITY): Promise<number> {
    const box = this.boxes.get(to);
    if (!box) return 0;
    const going: [string, Entry][] = [];
    for (const id of ids) {
      const e = box.entries.get(id);
      if (!e || e.leaving || e.expires > expiredAt) continue;
      e.leaving = true;
      going.push([id, e]);
    }
    if (going.length === 0) return 0;
    // A put still being written lands first (its batch is queued before ours or is ours).
    await Promise.all(going.map(([, e]) => e.written));
    const ops: RawOp[] = [];
    for (const [, e] of going)
      ops.push(this.del_(this.mail, `${to}!${e.seq}`), this.del_(this.expiries, `${timeKey(e.expires)}!${to}!${e.seq}`));
    try {
      await this.write(ops);
    } catch (err) {
      for (const [, e] of going) e.leaving = false;
      throw err;
    }
    for (const [id] of going) this.unindex(to, id);
    return going.length;
  }

  async sweep(now: number): Promise<number> {
    if (!this.loaded) await this.load();
    let swept = 0;
    for (;;) {
      // Expired at `now`: expires <= now, so every key below the next millisecond's.
      const due = new Map<string, string[]>();
      const keys: string[] = [];
      for await (const [key, value] of this.expiries.iterator({ lt: timeKey(now + 1), limit: SWEEP_BATCH })) {
        const rest = key.slice(key.indexOf('!') + 1);
        const to = rest.slice(0, rest.lastIndexOf('!'));
        due.set(to, [...(due.get(to) ?? []), (value as { id: string }).id]);
        keys.push(key);
      }
      for (const [to, ids] of due) swept += await this.remove(to, ids, now);
      // An index entry whose envelope an ack took meanwhile is gone already; any left over goes now, so
      // the next round cannot find it again.
      if (keys.length) await this.write(keys.map((key) => this.del_(this.expiries, key)));
      if (keys.length < SWEEP_BATCH) return swept;
    }
  }

  async size(): Promise<{ envelopes: number; bytes: number }> {
    if (!this.loaded) await this.load();
    return { ...this.total };
  }

  // ---- Grouped writes, in their stored form ----

  private put_(sub: Sub, key: string, value: unknown): RawOp {
    return { type: 'put', key: sub.prefixKey(key, 'utf8'), value: pack(value), keyEncoding: 'utf8', valueEncoding: 'buffer' };
  }

  private del_(sub: Sub, key: string): RawOp {
    return { type: 'del', key: sub.prefixKey(key, 'utf8'), keyEncoding: 'utf8' };
  }

  /** Ops queued for the next batch, the batch under way (settles, never rejects), and the next one. */
  private grouped: RawOp[] = [];
  private writing: Promise<void> | null = null;
  private queued: Promise<void> | null = null;

  /** Writes `ops` in one batch with the ops queued meanwhile: at once when none is under way, else next. */
  private write(ops: RawOp[]): Promise<void> {
    for (const op of ops) this.grouped.push(op);
    if (this.queued) return this.queued;
    if (!this.writing) return this.issue();
    const queued = this.writing.then(() => {
      this.queued = null;
      return this.issue();
    });
    this.queued = queued;
    return queued;
  }

  private issue(): Promise<void> {
    const ops = this.grouped;
    this.grouped = [];
    const write = writeRaw(this.db, ops, false);
    const settled: Promise<void> = write.then(
      () => this.landed(settled),
      () => this.landed(settled),
    );
    this.writing = settled;
    return write;
  }

  private landed(settled: Promise<void>): void {
    if (this.writing === settled) this.writing = null;
  }
}
