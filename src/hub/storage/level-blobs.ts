// The embedded backend's blobs (src/hub/storage/types.ts BlobStore, issue 20): each blob's ciphertext is
// one file, `<hub data dir>/blobs/<cid>`, and its record (sizes, progress, times; never who uploaded it)
// is in the hub's LevelDB (`blobs` sublevel). A piece is written at its offset and the record's
// `received` moves past it; every 8 MiB, and at the blob's last piece, the file is fsync'd and then the
// record written synced with `synced` (the bytes on disk for sure) = `received`. The pieces between go
// unsynced (an fsync per 1 MiB piece cost the hub a sixth of its CPU per upload, and stalled its reading):
// at load `received` is cut back to `synced`, so after a power loss the record never claims a byte the
// file may lack, and after a process crash an upload resumes at most 7 MiB further back. The file may hold
// more than `received`: the first piece written after the file is opened cuts it back to `received`, and
// a read never goes past it. An upload's file stays open between its pieces (closed once complete,
// deleted, or 10 s without a piece).
//
// One process (LevelDB allows no other): the records are also held in memory (loaded at first use), the
// total is counted there, and the steps on one blob take turns (KeyedSerial), which makes each method
// atomic as the interface asks.
import { type FileHandle, mkdir, open, readdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { AbstractSublevel } from 'abstract-level';
import type { Level } from 'level';
import { msgpack } from '../../../store/codec.js';
import { BLOB_PIECE } from '../../protocol/blob-address.js';
import { KeyedSerial } from '../../runtime/serial.js';
import { blobCharge, pieceParts, type BlobStatus, type BlobStore, type PieceBytes } from './types.js';

type Sub = AbstractSublevel<Level<string, unknown>, string | Buffer | Uint8Array, string, unknown>;

const SYNCED = { sync: true } as never;

/** The file is fsync'd and its record synced at least every this many bytes of an upload (and at its end). */
const SYNC_EVERY = 8 * BLOB_PIECE;

/** A record with the bytes of its file surely on disk (`synced`; absent in records written before it, when each piece was synced). */
type StoredBlob = BlobStatus & { synced: number };

/** An upload's file is closed once no piece came for this long. */
const WRITER_IDLE_MS = 10_000;

interface Writer {
  fh: FileHandle;
  /** The file's length as this process wrote it; -1 until its first write (then it is cut to the offset). */
  length: number;
  timer: NodeJS.Timeout;
}

/** What the interface gives out: the record without its sync mark. */
const statusOf = ({ synced: _, ...status }: StoredBlob): BlobStatus => status;

const isMissing = (err: unknown) => (err as NodeJS.ErrnoException).code === 'ENOENT';

export class LevelBlobs implements BlobStore {
  private readonly records: Sub;
  private readonly kept = new Map<string, StoredBlob>();
  private readonly total = { blobs: 0, bytes: 0 };
  private readonly serial = new KeyedSerial();
  /** Files of uploads under way, open between their pieces. */
  private readonly writing = new Map<string, Writer>();
  /** Set by close(): no upload's file is opened after it. */
  private closing = false;
  private loading: Promise<void> | null = null;
  /** Files left by a crash between a record's delete and its file's are removed once, at the first sweep. */
  private strays = true;

  constructor(
    db: Level<string, unknown>,
    /** `<hub data dir>/blobs`. */
    private readonly dir: string,
  ) {
    this.records = db.sublevel<string, unknown>('blobs', { valueEncoding: msgpack }) as Sub;
  }

  private load(): Promise<void> {
    this.loading ??= (async () => {
      for await (const [cid, value] of this.records.iterator()) {
        const rec = value as BlobStatus & { synced?: number };
        // Bytes written since the last fsync may be lost (a power loss): only the synced ones count.
        const synced = Math.min(rec.synced ?? rec.received, rec.received);
        this.count(cid, { ...rec, received: synced, synced }, 1);
      }
    })();
    return this.loading;
  }

  private count(cid: string, rec: StoredBlob, sign: 1 | -1): void {
    if (sign === 1) this.kept.set(cid, rec);
    else this.kept.delete(cid);
    this.total.blobs += sign;
    this.total.bytes += sign * blobCharge(rec.size);
  }

  private file(cid: string): string {
    return join(this.dir, cid);
  }

  /** One blob's steps in turn, after the records are loaded. */
  private turn<T>(cid: string, fn: () => Promise<T>): Promise<T> {
    return this.serial.run(cid, async () => {
      await this.load();
      return fn();
    });
  }

  begin(cid: string, size: number, now: number, expires: number, totalBytes: number) {
    return this.turn(cid, async (): Promise<{ status: BlobStatus; created: boolean } | 'full'> => {
      const known = this.kept.get(cid);
      if (known) return { status: statusOf(known), created: false };
      if (this.total.bytes + blobCharge(size) > totalBytes) return 'full';
      const rec: StoredBlob = { size, received: 0, complete: false, served: 0, created: now, updated: now, expires, synced: 0 };
      // Counted before the write's await: a begin of another blob meanwhile checks the total against it.
      this.count(cid, rec, 1);
      try {
        await this.records.put(cid, rec, SYNCED);
      } catch (err) {
        this.count(cid, rec, -1);
        throw err;
      }
      return { status: statusOf(rec), created: true };
    });
  }

  async status(cid: string): Promise<BlobStatus | undefined> {
    await this.load();
    const rec = this.kept.get(cid);
    return rec ? statusOf(rec) : undefined;
  }

  writePiece(cid: string, index: number, bytes: PieceBytes, now: number): Promise<number | null> {
    const { parts, length } = pieceParts(bytes);
    return this.turn(cid, async () => {
      const rec = this.kept.get(cid);
      const at = index * BLOB_PIECE;
      if (!rec || rec.complete || rec.received !== at) return null;
      if (length !== Math.min(BLOB_PIECE, rec.size - at)) throw new Error(`piece ${index} of ${cid} is ${length} bytes`);
      const received = at + length;
      const sync = received === rec.size || received - rec.synced >= SYNC_EVERY;
      if (!(await this.append(cid, at, parts, length, sync))) {
        // The file is gone (a crash between the two steps of a delete): start again from nothing.
        await this.save(cid, { ...rec, received: 0, synced: 0, updated: now });
        return null;
      }
      return (await this.save(cid, { ...rec, received, synced: sync ? received : rec.synced, updated: now }, sync)).received;
    });
  }

  /**
   * Writes `parts` (`length` bytes) at `at` (the file cut back to `at` first, unless it ends there), and
   * syncs it when `sync`; false when piece > 0 finds no file. The file stays open for the upload's next piece.
   */
  private async append(cid: string, at: number, parts: readonly Uint8Array[], length: number, sync: boolean): Promise<boolean> {
    const w = await this.writer(cid, at);
    if (!w) return false;
    try {
      if (w.length !== at) await w.fh.truncate(at);
      // One write of all the parts (writev), each part where the one before it ended.
      const { bytesWritten } = await w.fh.writev(parts as Uint8Array[], at);
      if (bytesWritten !== length) throw new Error(`wrote ${bytesWritten} of the ${length} bytes of a piece of ${cid} (is the disk full?)`);
      if (sync) await w.fh.sync();
      w.length = at + length;
    } catch (err) {
      await this.closeWriter(cid);
      throw err;
    }
    w.timer.refresh();
    return true;
  }

  /**
   * The open file of an upload, opened for its first piece (or its first since the file was closed): an
   * open, a cut and a close for every piece cost the hub CPU. Null when piece > 0 finds no file.
   */
  private async writer(cid: string, at: number): Promise<Writer | null> {
    if (this.closing) throw new Error('the hub storage is closing: no piece is written');
    const open_ = this.writing.get(cid);
    // Its file unlinked meanwhile (by hand, or a stray sweep): never written into a file that is gone.
    if (open_ && (await open_.fh.stat()).nlink > 0) return open_;
    if (open_) await this.closeWriter(cid);
    if (at === 0) await mkdir(this.dir, { recursive: true, mode: 0o700 });
    let fh: FileHandle;
    try {
      fh = await open(this.file(cid), at === 0 ? 'w' : 'r+', 0o600);
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
    // Closed in the blob's turn once no piece came for a while (an upload dropped or done).
    const timer = setTimeout(() => void this.serial.run(cid, () => this.closeWriter(cid)).catch(() => {}), WRITER_IDLE_MS);
    timer.unref();
    // Its length unknown (a crash may have left more than `received`): the first piece cuts it.
    const w: Writer = { fh, length: -1, timer };
    this.writing.set(cid, w);
    return w;
  }

  /** Closes the blob's file if it is open for writing (in the blob's turn: no piece is being written). */
  private async closeWriter(cid: string): Promise<void> {
    const w = this.writing.get(cid);
    if (!w) return;
    this.writing.delete(cid);
    clearTimeout(w.timer);
    await w.fh.close().catch(() => {});
  }

  private async save(cid: string, rec: StoredBlob, sync = true): Promise<StoredBlob> {
    await this.records.put(cid, rec, sync ? SYNCED : ({} as never));
    this.kept.set(cid, rec);
    return rec;
  }

  complete(cid: string): Promise<boolean> {
    return this.turn(cid, async () => {
      const rec = this.kept.get(cid);
      if (!rec || rec.received !== rec.size) return false;
      await this.closeWriter(cid);
      if (!rec.complete) await this.save(cid, { ...rec, complete: true });
      return true;
    });
  }

  async *read(cid: string, fromPiece: number, into?: () => Buffer): AsyncIterable<Uint8Array> {
    const rec = await this.status(cid);
    if (!rec || fromPiece * BLOB_PIECE >= rec.received) return;
    const fh = await open(this.file(cid), 'r');
    try {
      for (let at = fromPiece * BLOB_PIECE; at < rec.received; at += BLOB_PIECE) {
        const length = Math.min(BLOB_PIECE, rec.received - at);
        const piece = into ? into().subarray(0, length) : Buffer.allocUnsafe(length);
        const { bytesRead } = await fh.read(piece, 0, piece.length, at);
        if (bytesRead !== piece.length) throw new Error(`the file of blob ${cid} ends before its ${rec.received} bytes`);
        yield piece;
      }
    } finally {
      await fh.close();
    }
  }

  setServed(cid: string, offset: number): Promise<void> {
    return this.turn(cid, async () => {
      const rec = this.kept.get(cid);
      // Unsynced: a download's progress is a hint, not worth a disk flush per piece.
      if (rec && offset > rec.served) await this.save(cid, { ...rec, served: offset }, false);
    });
  }

  async delete(cids: string[]): Promise<string[]> {
    const gone = await Promise.all([...new Set(cids)].map((cid) => this.turn(cid, () => this.remove(cid))));
    return gone.filter((cid): cid is string => cid !== null);
  }

  /** The record first (synced), then the file: a crash between leaves a stray file, never a record without bytes. */
  private async remove(cid: string, due?: (rec: BlobStatus) => boolean): Promise<string | null> {
    const rec = this.kept.get(cid);
    if (!rec || (due && !due(rec))) return null;
    await this.records.del(cid, SYNCED);
    this.count(cid, rec, -1);
    // Never left open on a file that is gone: a piece would go into the unlinked file.
    await this.closeWriter(cid);
    await unlink(this.file(cid)).catch((err) => {
      if (!isMissing(err)) throw err;
    });
    return cid;
  }

  async sweep(now: number, idleBefore: number): Promise<string[]> {
    await this.load();
    const due = (rec: BlobStatus) => rec.expires <= now || (!rec.complete && rec.updated <= idleBefore);
    const gone: string[] = [];
    for (const [cid, rec] of [...this.kept]) {
      if (!due(rec)) continue;
      // Decided again in its turn: a piece may have come meanwhile.
      const removed = await this.turn(cid, () => this.remove(cid, due));
      if (removed) gone.push(removed);
    }
    if (this.strays) await this.removeStrays();
    return gone;
  }

  private async removeStrays(): Promise<void> {
    this.strays = false;
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch (err) {
      if (isMissing(err)) return;
      throw err;
    }
    for (const name of names)
      if (!this.kept.has(name))
        await this.turn(name, async () => {
          if (!this.kept.has(name)) await unlink(this.file(name)).catch(() => {});
        });
  }

  /** Closes the files of uploads under way (the storage is closing). */
  async close(): Promise<void> {
    this.closing = true;
    await Promise.all([...this.writing.keys()].map((cid) => this.serial.run(cid, () => this.closeWriter(cid))));
  }

  async have(cids: string[]): Promise<Set<string>> {
    await this.load();
    return new Set(cids.filter((cid) => this.kept.has(cid)));
  }

  async size(): Promise<{ blobs: number; bytes: number }> {
    await this.load();
    return { ...this.total };
  }
}
