// The PostgreSQL backend's blobs (src/hub/storage/types.ts BlobStore, issue 20; schema: migration 2 in
// migrations.ts). A blob is a `blobs` row (sizes, progress, times; never who uploaded it) and its pieces,
// one `blob_pieces` row of 1 MiB each, so any replica stores, resumes and serves any blob. Across
// replicas:
// - a piece is stored in the same transaction that moves `received` past it, and only while `received`
//   is still its offset (the UPDATE's condition, under the row's lock): of two uploads of one blob, one
//   wins each piece, and `received` never claims a piece that is not committed;
// - the total is one counter row, updated in the transaction that begins or deletes a blob and only where
//   the bound still holds (as the mailbox's total in postgres.ts keepMail);
// - a deleted blob's row goes first (one short transaction, the counter with it), then its pieces in
//   batches of a few, each its own statement, so deleting 64 MiB locks nothing for long. Pieces are keyed
//   by the row's id, not the cid: a blob uploaded again under the same cid never mixes with the pieces of
//   the one before, and pieces a crash left without a row are found and deleted by the sweep.
import type { Sql, TransactionSql } from 'postgres';
import { BLOB_PIECE } from '../../protocol/blob-address.js';
import { blobCharge, pieceParts, type BlobStatus, type BlobStore, type PieceBytes } from './types.js';

interface BlobRow {
  size: string;
  received: string;
  complete: boolean;
  served: string;
  created: string;
  updated: string;
  expires: string;
}

/** Blobs deleted per sweep transaction. */
const SWEEP_BATCH = 100;
/** Pieces deleted per statement (16 MiB). */
const DROP_BATCH = 16;

const statusOf = (r: BlobRow): BlobStatus => ({
  size: Number(r.size),
  received: Number(r.received),
  complete: r.complete,
  served: Number(r.served),
  created: Number(r.created),
  updated: Number(r.updated),
  expires: Number(r.expires),
});

/** A deadlock (two deletes locking rows in another order): the transaction is run again. */
async function retrying<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      if ((err as { code?: string }).code !== '40P01' || attempt >= 10) throw err;
      await new Promise((r) => setTimeout(r, Math.random() * 20));
    }
  }
}

export class PgBlobs implements BlobStore {
  constructor(private readonly sql: Sql) {}

  begin(cid: string, size: number, now: number, expires: number, totalBytes: number) {
    return retrying(() =>
      this.sql.begin(async (tx): Promise<{ status: BlobStatus; created: boolean } | 'full'> => {
        const [made] = await tx<BlobRow[]>`
          insert into blobs (cid, size, received, complete, served, created, updated, expires)
          values (${cid}, ${size}, 0, false, 0, ${now}, ${now}, ${expires})
          on conflict (cid) do nothing
          returning size, received, complete, served, created, updated, expires`;
        if (!made) {
          const [row] = await tx<BlobRow[]>`
            select size, received, complete, served, created, updated, expires from blobs where cid = ${cid}`;
          // Deleted between the two statements: begun again, as new.
          if (!row) throw Object.assign(new Error('blob deleted while begun'), { code: '40P01' });
          return { status: statusOf(row), created: false };
        }
        const counted = await tx`
          update blob_total set blobs = blobs + 1, bytes = bytes + ${blobCharge(size)}
          where id = 1 and bytes + ${blobCharge(size)} <= ${totalBytes} returning id`;
        if (counted.length === 0) {
          await tx.rollback();
          return 'full';
        }
        return { status: statusOf(made), created: true };
      }),
    );
  }

  async status(cid: string): Promise<BlobStatus | undefined> {
    const [row] = await this.sql<BlobRow[]>`
      select size, received, complete, served, created, updated, expires from blobs where cid = ${cid}`;
    return row ? statusOf(row) : undefined;
  }

  async writePiece(cid: string, index: number, bytes: PieceBytes, now: number): Promise<number | null> {
    const at = index * BLOB_PIECE;
    const { parts, length: n } = pieceParts(bytes);
    // One bytea value: the parts are joined here, and only here.
    const piece = parts.length === 1 ? Buffer.from(parts[0]!.buffer, parts[0]!.byteOffset, n) : Buffer.concat(parts, n);
    return this.sql.begin(async (tx) => {
      // The row's lock is held from here to the commit: another upload's piece waits, then finds `received` moved.
      const [row] = await tx<{ id: string }[]>`
        update blobs set received = ${at + n}, updated = ${now}
        where cid = ${cid} and received = ${at} and not complete and least(size - received, ${BLOB_PIECE}) = ${n}
        returning id`;
      if (!row) return null;
      await tx`
        insert into blob_pieces (blob, idx, bytes) values (${row.id}, ${index}, ${piece})
        on conflict (blob, idx) do update set bytes = excluded.bytes`;
      return at + n;
    });
  }

  async complete(cid: string): Promise<boolean> {
    const done = await this.sql`update blobs set complete = true where cid = ${cid} and received = size returning cid`;
    return done.length === 1;
  }

  async *read(cid: string, fromPiece: number, _into?: () => Buffer): AsyncIterable<Uint8Array> {
    const [row] = await this.sql<{ id: string; received: string }[]>`select id, received from blobs where cid = ${cid}`;
    if (!row) return;
    const pieces = Math.ceil(Number(row.received) / BLOB_PIECE);
    // One piece per round trip: a download holds one piece in memory (and the socket's buffer another).
    for (let idx = fromPiece; idx < pieces; idx++) {
      const [piece] = await this.sql<{ bytes: Buffer }[]>`select bytes from blob_pieces where blob = ${row.id} and idx = ${idx}`;
      if (!piece) throw new Error(`blob ${cid} was deleted while it was read`);
      yield piece.bytes;
    }
  }

  async setServed(cid: string, offset: number): Promise<void> {
    await this.sql`update blobs set served = ${offset} where cid = ${cid} and served < ${offset}`;
  }

  async delete(cids: string[]): Promise<string[]> {
    if (cids.length === 0) return [];
    return this.deleteWhere((tx) => tx`select cid from blobs where cid = any(${[...new Set(cids)]}::text[]) for update`);
  }

  /**
   * Deletes the rows `pick` locks and takes them off the total, in one short transaction; then their pieces.
   * The CIDs deleted.
   */
  private async deleteWhere(pick: (tx: TransactionSql) => Promise<readonly { cid: string }[]>): Promise<string[]> {
    const gone = await retrying(() =>
      this.sql.begin(async (tx) => {
        const cids = (await pick(tx)).map((r) => r.cid);
        if (cids.length === 0) return [];
        const rows = await tx<{ cid: string; id: string; size: string }[]>`
          delete from blobs where cid = any(${cids}::text[]) returning cid, id, size`;
        const bytes = rows.reduce((sum, r) => sum + blobCharge(Number(r.size)), 0);
        await tx`update blob_total set blobs = blobs - ${rows.length}, bytes = bytes - ${bytes} where id = 1`;
        return rows;
      }),
    );
    for (const r of gone) await this.dropPieces(r.id);
    return gone.map((r) => r.cid);
  }

  /** The pieces of a deleted blob, a few per statement. */
  private async dropPieces(id: string): Promise<void> {
    for (;;) {
      const r = await this.sql`
        delete from blob_pieces where blob = ${id} and idx in (
          select idx from blob_pieces where blob = ${id} order by idx limit ${DROP_BATCH})`;
      if (r.count < DROP_BATCH) return;
    }
  }

  async sweep(now: number, idleBefore: number): Promise<string[]> {
    const swept: string[] = [];
    for (;;) {
      // Rows another transaction holds (a piece being stored, another replica's sweep) are left for later.
      const gone = await this.deleteWhere(
        (tx) => tx<{ cid: string }[]>`
          select cid from blobs where expires <= ${now} or (not complete and updated <= ${idleBefore})
          limit ${SWEEP_BATCH} for update skip locked`,
      );
      swept.push(...gone);
      if (gone.length < SWEEP_BATCH) break;
    }
    await this.dropStrays();
    return swept;
  }

  /** Pieces whose row is gone (a crash between a row's delete and its pieces'). */
  private async dropStrays(): Promise<void> {
    const strays = await this.sql<{ blob: string }[]>`
      select distinct p.blob from blob_pieces p where not exists (select 1 from blobs b where b.id = p.blob) limit ${SWEEP_BATCH}`;
    for (const s of strays) await this.dropPieces(s.blob);
  }

  async have(cids: string[]): Promise<Set<string>> {
    if (cids.length === 0) return new Set();
    const rows = await this.sql<{ cid: string }[]>`select cid from blobs where cid = any(${cids}::text[])`;
    return new Set(rows.map((r) => r.cid));
  }

  async size(): Promise<{ blobs: number; bytes: number }> {
    const [row] = await this.sql<{ blobs: string; bytes: string }[]>`select blobs, bytes from blob_total where id = 1`;
    return { blobs: Number(row!.blobs), bytes: Number(row!.bytes) };
  }
}
