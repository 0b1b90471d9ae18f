// The hub's blob store contract (issue 20, PROTOCOL §8.11; src/hub/storage/types.ts BlobStore), one suite
// run against both backends: PostgreSQL (shared by replicas: its races also run on TWO storages opened
// on one database) and the embedded LevelDB (files under the data dir). Real databases, real files.
import test, { type ExecutionContext } from 'ava';
import { randomBytes } from 'node:crypto';
import { readdir, stat, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import postgres from 'postgres';
import { BLOB_PIECE } from '../src/protocol/blob-address.js';
import { openLevelStorage } from '../src/hub/storage/level.js';
import { openPostgresStorage } from '../src/hub/storage/postgres.js';
import { blobCharge, type HubStorage } from '../src/hub/storage/types.js';
import { sameBytes } from './helpers/bytes.js';
import { postgresUrl, usePostgres } from './helpers/postgres.js';
import { tempDir } from './helpers/tmp.js';

usePostgres(test);

interface Opened {
  storage: HubStorage;
  /** A second storage on the same store (a replica), or null for the one-process backend. */
  replica: (() => Promise<HubStorage>) | null;
  /** Reopens the store, as a restarted hub does (the first is closed). */
  reopen: () => Promise<HubStorage>;
  /** The LevelDB data dir, null for PostgreSQL. */
  dir: string | null;
  url: string | null;
}

function closing(t: ExecutionContext, s: HubStorage): HubStorage {
  t.teardown(() => s.close().catch(() => {}));
  return s;
}

const backends: { name: string; open(t: ExecutionContext): Promise<Opened> }[] = [
  {
    name: 'postgres',
    async open(t) {
      const url = await postgresUrl(t);
      const storage = closing(t, await openPostgresStorage(url));
      return {
        storage,
        replica: async () => closing(t, await openPostgresStorage(url)),
        reopen: async () => {
          await storage.close();
          return closing(t, await openPostgresStorage(url));
        },
        dir: null,
        url,
      };
    },
  },
  {
    name: 'leveldb',
    async open(t) {
      const dir = await tempDir(t, 'anet-blobs-');
      const storage = closing(t, await openLevelStorage(dir));
      return {
        storage,
        replica: null,
        reopen: async () => {
          await storage.close();
          return closing(t, await openLevelStorage(dir));
        },
        dir,
        url: null,
      };
    },
  },
];

const CID = (n: number) => `bafkrei${String(n).padStart(52, 'a')}`;
const BIG = 1024 ** 4;
const T0 = 1_700_000_000_000;

async function readAll(s: HubStorage, cid: string, from = 0): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const piece of s.blobs.read(cid, from)) parts.push(Buffer.from(piece));
  return Buffer.concat(parts);
}

/** Writes `bytes` as the blob's pieces from piece `from`, each answered with the new `received`. */
async function writeAll(s: HubStorage, cid: string, bytes: Buffer, from = 0): Promise<(number | null)[]> {
  const out: (number | null)[] = [];
  for (let i = from; i * BLOB_PIECE < bytes.length; i++)
    out.push(await s.blobs.writePiece(cid, i, bytes.subarray(i * BLOB_PIECE, (i + 1) * BLOB_PIECE), T0 + i));
  return out;
}

for (const backend of backends) {
  const title = (what: string) => `[${backend.name}] issue 20 / PROTOCOL §8.11 blob store: ${what}`;

  test(title('a piece given as the parts it arrived in is stored as their bytes in order'), async (t) => {
    const { storage: s } = await backend.open(t);
    const bytes = randomBytes(BLOB_PIECE + 1000);
    const cid = CID(2);
    await s.blobs.begin(cid, bytes.length, T0, T0 + 1000, BIG);
    // As the hub receives a piece: socket reads of uneven sizes, the last one cut at the piece's end.
    const cuts = [0, 1, 65_536, 65_537, 400_000, BLOB_PIECE];
    const parts = cuts.slice(1).map((end, i) => bytes.subarray(cuts[i]!, end));
    t.is(await s.blobs.writePiece(cid, 0, parts, T0), BLOB_PIECE);
    t.is(
      await s.blobs.writePiece(cid, 1, [bytes.subarray(BLOB_PIECE, BLOB_PIECE + 10), bytes.subarray(BLOB_PIECE + 10)], T0),
      bytes.length,
    );
    t.true(await s.blobs.complete(cid));
    t.true((await readAll(s, cid)).equals(bytes));
  });

  test(title('begun, stored piece by piece only at `received`, completed, read back exact, served, deleted'), async (t) => {
    const { storage: s } = await backend.open(t);
    const bytes = randomBytes(2.5 * BLOB_PIECE);
    const cid = CID(1);
    t.is(await s.blobs.status(cid), undefined);
    const begun = await s.blobs.begin(cid, bytes.length, T0, T0 + 1000, BIG);
    t.deepEqual(begun, {
      created: true,
      status: { size: bytes.length, received: 0, complete: false, served: 0, created: T0, updated: T0, expires: T0 + 1000 },
    });
    t.like(await s.blobs.begin(cid, 5, T0 + 1, T0 + 9, BIG), { created: false, status: { size: bytes.length, created: T0 } });
    t.is(await s.blobs.writePiece(cid, 1, bytes.subarray(BLOB_PIECE, 2 * BLOB_PIECE), T0), null, 'piece 1 before piece 0');
    t.is(await s.blobs.writePiece(cid, 0, bytes.subarray(0, BLOB_PIECE), T0 + 5), BLOB_PIECE);
    t.is(await s.blobs.writePiece(cid, 0, bytes.subarray(0, BLOB_PIECE), T0 + 6), null, 'piece 0 again');
    t.like(await s.blobs.status(cid), { received: BLOB_PIECE, updated: T0 + 5, complete: false });
    t.false(await s.blobs.complete(cid), 'not every byte is in');
    sameBytes(t, await readAll(s, cid), bytes.subarray(0, BLOB_PIECE), 'an incomplete blob reads what it has');
    t.deepEqual(await writeAll(s, cid, bytes, 1), [2 * BLOB_PIECE, bytes.length]);
    t.true(await s.blobs.complete(cid));
    t.true(await s.blobs.complete(cid), 'twice is fine');
    t.is(await s.blobs.writePiece(cid, 3, Buffer.alloc(0), T0), null, 'nothing after completion');
    sameBytes(t, await readAll(s, cid), bytes);
    sameBytes(t, await readAll(s, cid, 2), bytes.subarray(2 * BLOB_PIECE));
    sameBytes(t, await readAll(s, cid, 3), Buffer.alloc(0));
    await s.blobs.setServed(cid, 2 * BLOB_PIECE);
    await s.blobs.setServed(cid, BLOB_PIECE);
    t.like(await s.blobs.status(cid), { complete: true, received: bytes.length, served: 2 * BLOB_PIECE });
    t.deepEqual(await s.blobs.size(), { blobs: 1, bytes: bytes.length });
    t.deepEqual([...(await s.blobs.have([cid, CID(2)]))], [cid]);
    t.deepEqual(await s.blobs.delete([cid, CID(2)]), [cid]);
    t.deepEqual(await s.blobs.delete([cid]), []);
    t.is(await s.blobs.status(cid), undefined);
    sameBytes(t, await readAll(s, cid), Buffer.alloc(0));
    t.deepEqual(await s.blobs.size(), { blobs: 0, bytes: 0 });
  });

  test(title('a blob uploaded again under the same cid after its delete reads its new bytes only'), async (t) => {
    const { storage: s } = await backend.open(t);
    const cid = CID(3);
    await s.blobs.begin(cid, 2 * BLOB_PIECE, T0, T0 + 1000, BIG);
    await writeAll(s, cid, Buffer.alloc(2 * BLOB_PIECE, 1));
    await s.blobs.delete([cid]);
    await s.blobs.begin(cid, 100, T0, T0 + 1000, BIG);
    t.is(await s.blobs.writePiece(cid, 0, Buffer.alloc(100, 2), T0), 100);
    sameBytes(t, await readAll(s, cid), Buffer.alloc(100, 2));
  });

  test(
    title('the total counts each blob at least 64 KiB and is never passed by 20 begins at once (two replicas where there are)'),
    async (t) => {
      const opened = await backend.open(t);
      const stores = opened.replica ? [opened.storage, await opened.replica()] : [opened.storage];
      const total = 5 * blobCharge(100);
      const rs = await Promise.all(
        Array.from({ length: 20 }, (_, i) => stores[i % stores.length]!.blobs.begin(CID(100 + i), 100, T0, T0 + 1000, total)),
      );
      t.is(rs.filter((r) => r !== 'full').length, 5);
      t.deepEqual(await opened.storage.blobs.size(), { blobs: 5, bytes: total });
      const kept = rs.flatMap((r, i) => (r === 'full' ? [] : [CID(100 + i)]));
      t.is(await opened.storage.blobs.begin(CID(200), 100, T0, T0 + 1000, total), 'full');
      t.like(await opened.storage.blobs.begin(kept[0]!, 100, T0, T0 + 1000, total), { created: false }, 'a kept blob is no new bytes');
      await opened.storage.blobs.delete([kept[0]!]);
      t.like(await opened.storage.blobs.begin(CID(200), 100, T0, T0 + 1000, total), { created: true }, 'room again after a delete');
    },
  );

  test(title('two uploads of one piece at once (on two replicas where there are): one wins'), async (t) => {
    const opened = await backend.open(t);
    const stores = opened.replica ? [opened.storage, await opened.replica()] : [opened.storage];
    const cid = CID(4);
    await opened.storage.blobs.begin(cid, 2 * BLOB_PIECE, T0, T0 + 1000, BIG);
    for (let round = 0; round < 2; round++) {
      const pieces = [Buffer.alloc(BLOB_PIECE, 10 + round), Buffer.alloc(BLOB_PIECE, 20 + round)];
      const rs = await Promise.all(pieces.map((p, i) => stores[i % stores.length]!.blobs.writePiece(cid, round, p, T0)));
      t.is(rs.filter((r) => r === (round + 1) * BLOB_PIECE).length, 1);
      t.is(rs.filter((r) => r === null).length, 1);
      const winner = pieces[rs.indexOf((round + 1) * BLOB_PIECE)]!;
      sameBytes(t, (await readAll(opened.storage, cid, round)).subarray(0, BLOB_PIECE), winner);
    }
  });

  test(title('the sweep deletes expired blobs and incomplete ones idle since a time, and keeps the rest'), async (t) => {
    const { storage: s } = await backend.open(t);
    await s.blobs.begin(CID(5), 100, T0, T0 + 1000, BIG); // complete, expires at T0 + 1000
    await s.blobs.writePiece(CID(5), 0, Buffer.alloc(100), T0);
    await s.blobs.complete(CID(5));
    await s.blobs.begin(CID(6), 2 * BLOB_PIECE, T0, T0 + 5000, BIG); // incomplete, last piece at T0 + 50
    await s.blobs.writePiece(CID(6), 0, Buffer.alloc(BLOB_PIECE), T0 + 50);
    await s.blobs.begin(CID(7), 100, T0 + 60, T0 + 5000, BIG); // incomplete, nothing since T0 + 60
    t.deepEqual(await s.blobs.sweep(T0 + 999, T0 + 49), []);
    t.deepEqual((await s.blobs.sweep(T0 + 1000, T0 + 50)).sort(), [CID(5), CID(6)]);
    t.deepEqual([...(await s.blobs.have([CID(5), CID(6), CID(7)]))], [CID(7)]);
    t.deepEqual(await s.blobs.sweep(T0 + 5000, 0), [CID(7)], 'past its expiry, complete or not');
    t.deepEqual(await s.blobs.size(), { blobs: 0, bytes: 0 });
  });

  test(
    title('after a restart the record and the bytes agree, and an upload resumes from `received` (on LevelDB the last synced piece)'),
    async (t) => {
      const opened = await backend.open(t);
      const bytes = randomBytes(11 * BLOB_PIECE);
      const cid = CID(8);
      await opened.storage.blobs.begin(cid, bytes.length, T0, T0 + 1000, BIG);
      t.deepEqual((await writeAll(opened.storage, cid, bytes.subarray(0, 9 * BLOB_PIECE))).at(-1), 9 * BLOB_PIECE);
      if (opened.dir) {
        // A crash after a piece reached the file and before its record moved: the file is a piece longer.
        await writeFile(join(opened.dir, 'blobs', cid), bytes.subarray(0, 9.5 * BLOB_PIECE));
      }
      const s = await opened.reopen();
      // LevelDB syncs every 8 MiB: the 9th piece was not synced, and a power loss could have lost it, so
      // after a restart it does not count. PostgreSQL commits each piece.
      const kept = opened.dir ? 8 * BLOB_PIECE : 9 * BLOB_PIECE;
      t.like(await s.blobs.status(cid), { received: kept, complete: false });
      sameBytes(t, await readAll(s, cid), bytes.subarray(0, kept), 'never past `received`');
      t.deepEqual((await writeAll(s, cid, bytes, kept / BLOB_PIECE)).at(-1), bytes.length);
      t.true(await s.blobs.complete(cid));
      sameBytes(t, await readAll(s, cid), bytes);
      if (opened.dir) t.is((await stat(join(opened.dir, 'blobs', cid))).size, bytes.length, 'the extra piece was cut first');
    },
  );
}

test('[leveldb] issue 20 / PROTOCOL §8.11 blob store: one file per blob under blobs/, gone with its blob; a stray file is removed by the sweep', async (t) => {
  const dir = await tempDir(t, 'anet-blobs-');
  const s = closing(t, await openLevelStorage(dir));
  await s.blobs.begin(CID(9), 100, T0, T0 + 1000, BIG);
  await s.blobs.writePiece(CID(9), 0, Buffer.alloc(100, 9), T0);
  t.deepEqual(await readdir(join(dir, 'blobs')), [CID(9)]);
  await s.blobs.delete([CID(9)]);
  t.deepEqual(await readdir(join(dir, 'blobs')), []);
  // A crash between a record's delete and its file's leaves a file no record names.
  await writeFile(join(dir, 'blobs', CID(10)), 'stray');
  await s.blobs.sweep(T0, 0);
  t.deepEqual(await readdir(join(dir, 'blobs')), []);
});

test('[leveldb] issue 20 / PROTOCOL §8.11 blob store: a file lost to a crash between the two steps of a delete restarts the upload from nothing', async (t) => {
  const dir = await tempDir(t, 'anet-blobs-');
  const s = closing(t, await openLevelStorage(dir));
  await s.blobs.begin(CID(11), 2 * BLOB_PIECE, T0, T0 + 1000, BIG);
  await s.blobs.writePiece(CID(11), 0, Buffer.alloc(BLOB_PIECE), T0);
  await unlink(join(dir, 'blobs', CID(11)));
  t.is(await s.blobs.writePiece(CID(11), 1, Buffer.alloc(BLOB_PIECE), T0), null);
  t.like(await s.blobs.status(CID(11)), { received: 0 });
  t.is(await s.blobs.writePiece(CID(11), 0, Buffer.alloc(BLOB_PIECE), T0), BLOB_PIECE);
});

test('[postgres] issue 20 / PROTOCOL §8.11 blob store: a deleted blob leaves no piece row; pieces a crash left without their row are swept', async (t) => {
  const url = await postgresUrl(t);
  const s = closing(t, await openPostgresStorage(url));
  const sql = postgres(url, { onnotice: () => {} });
  t.teardown(() => sql.end());
  await s.blobs.begin(CID(12), 40 * BLOB_PIECE, T0, T0 + 1000, BIG);
  for (let i = 0; i < 40; i++) await s.blobs.writePiece(CID(12), i, Buffer.alloc(BLOB_PIECE, i), T0);
  t.is((await sql`select count(*)::int as n from blob_pieces`)[0]!.n, 40);
  await s.blobs.delete([CID(12)]);
  t.is((await sql`select count(*)::int as n from blob_pieces`)[0]!.n, 0, 'in batches, to the last');
  await sql`insert into blob_pieces (blob, idx, bytes) values (999999, 0, '\\x00'), (999999, 1, '\\x00')`;
  await s.blobs.sweep(T0, 0);
  t.is((await sql`select count(*)::int as n from blob_pieces`)[0]!.n, 0);
});
