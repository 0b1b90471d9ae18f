// The blob routes (issue 20, PROTOCOL §8.11), anonymous like a relay send: PUT /blobs/<cid> (upload, from
// the offset the hub has: resumable by whole pieces), GET /blobs/<cid>/status, GET /blobs/<cid> (download,
// `Range: bytes=N-` to resume), DELETE /blobs/<cid> (or the relay's signed ack naming blobs,
// src/hub/relay-routes.ts). A body is never held beyond two pieces: each whole 1 MiB piece is stored as
// soon as it is in (while the next fills), so a dropped connection keeps every whole piece; a download
// streams piece by piece as the socket drains.
import type { Hash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { BLOB_OFFSET_HEADER, BLOB_PIECE, BLOB_SIZE_HEADER, MAX_BLOB_BYTES, blobDigest } from '../protocol/blob-address.js';
import type { Follow } from './blobs.js';
import type { HubContext } from './context.js';
import { closed, drainedOrClosed, unlessClosed } from '../util/stream.js';
import { HubError, dropRest, send } from './http.js';
import type { BlobStatus } from './storage/types.js';

/** The longest a piece of an upload may take to arrive (the least rate: 1 MiB a minute, ~17 KiB/s). */
const PIECE_MS = 60_000;

const badBlob = (message: string) => new HubError(400, 'BAD_BLOB', message);
const noBlob = (cid: string) => new HubError(404, 'NO_BLOB', `this hub keeps no blob ${cid}`);
const wrongOffset = (received: number) =>
  new HubError(409, 'BLOB_OFFSET', `the upload must continue from the bytes the hub has: ${received}`, undefined, { received });

/** PUT /blobs/<cid>, GET /blobs/<cid>/status, GET /blobs/<cid>. */
export async function handleBlobs(
  ctx: HubContext,
  client: string,
  req: IncomingMessage,
  res: ServerResponse,
  parts: string[],
  method: string,
): Promise<void> {
  const cid = parts[1] ?? '';
  if (parts.length === 3 && parts[2] === 'status' && method === 'GET') return statusOf(ctx, res, cid);
  if (parts.length === 2 && method === 'PUT') return upload(ctx, client, req, res, cid);
  if (parts.length === 2 && method === 'GET') return download(ctx, req, res, cid);
  if (parts.length === 2 && method === 'DELETE') return remove(ctx, res, cid);
  throw new HubError(404, 'NOT_FOUND', `no route ${method} /${parts.join('/')}`);
}

/**
 * DELETE /blobs/<cid>, anonymous: whoever knows a blob's address holds its task (the provider, once the
 * call ended) or uploaded it (a caller whose send failed). Unsigned so the hub does not learn which AID
 * read which blob. 200 `{"deleted": true|false}` (false: not kept, e.g. deleted already).
 */
async function remove(ctx: HubContext, res: ServerResponse, cid: string): Promise<void> {
  digestOf(cid);
  send(res, 200, { deleted: (await ctx.blobs.delete([cid])) === 1 });
}

/** The sha2-256 digest `cid` names, or 400 BAD_BLOB. */
function digestOf(cid: string): Uint8Array {
  const digest = blobDigest(cid);
  if (!digest) throw badBlob(`"${cid.slice(0, 80)}" is not a blob address (CIDv1, raw, sha2-256, base32: bafkrei…)`);
  return digest;
}

async function statusOf(ctx: HubContext, res: ServerResponse, cid: string): Promise<void> {
  digestOf(cid);
  const s = await ctx.storage.blobs.status(cid);
  if (!s) throw new HubError(404, 'NO_BLOB', `this hub keeps no blob ${cid}`);
  send(res, 200, { size: s.size, received: s.received, complete: s.complete, served: s.served });
}

/** A decimal header of at most 16 digits; null when absent or anything else. */
function count(req: IncomingMessage, name: string): number | null {
  const v = req.headers[name];
  return typeof v === 'string' && /^(0|[1-9][0-9]{0,15})$/.test(v) ? Number(v) : null;
}

const answer = (s: BlobStatus) => ({ received: s.received, size: s.size, complete: s.complete });

async function upload(ctx: HubContext, client: string, req: IncomingMessage, res: ServerResponse, cid: string): Promise<void> {
  const digest = digestOf(cid);
  const size = count(req, BLOB_SIZE_HEADER);
  const offset = count(req, BLOB_OFFSET_HEADER);
  if (size === null || offset === null)
    throw badBlob(
      `a blob upload has headers ${BLOB_SIZE_HEADER} (the ciphertext's whole size) and ${BLOB_OFFSET_HEADER} (where this body starts)`,
    );
  if (size > MAX_BLOB_BYTES) throw new HubError(413, 'TOO_LARGE', `a blob is at most ${MAX_BLOB_BYTES} bytes, not ${size}`);
  const length = count(req, 'content-length');
  if (offset > size || (length !== null && length > size - offset))
    throw badBlob(`the body goes past the blob's ${size} bytes (from ${offset}, ${length ?? '?'} bytes)`);
  // A blob the hub does not keep begins at 0: nothing is begun (or counted) for an upload from elsewhere.
  const known = await ctx.storage.blobs.status(cid);
  if (!known && offset !== 0) throw wrongOffset(0);
  const begun = known ?? (await ctx.blobs.begin(cid, size, client));
  if (begun.size !== size) throw badBlob(`blob ${cid} was begun with ${begun.size} bytes, not ${size}`);
  if (begun.complete) return finish(req, res, begun);
  if (offset !== begun.received) throw wrongOffset(begun.received);
  // Hashed as it comes, from 0 or from where an earlier upload of this process stopped: a blob uploaded
  // through this process, in one request or several, needs no read-back to be checked.
  const hash = ctx.blobs.hashFrom(cid, begun, offset);
  const upTo = { at: offset };
  let received: number;
  try {
    received = await receive(ctx, client, req, cid, begun, offset, hash, upTo);
  } finally {
    if (hash && upTo.at < size) ctx.blobs.keepHash(cid, begun, upTo.at, hash);
    // Begun by this request and not one piece stored: nothing is kept (or counted) for an empty upload.
    if (!known && size > 0) await dropIfEmpty(ctx, cid);
  }
  if (received === 0 && size > 0) return finish(req, res, { ...begun, received: 0, complete: false });
  const ok = received !== size || (await ctx.blobs.verify(cid, digest, hash?.digest()));
  if (!ok) throw new HubError(422, 'BLOB_DIGEST', `the ${size} bytes received do not hash to ${cid}: the blob is deleted`);
  const now = await ctx.storage.blobs.status(cid);
  // Deleted meanwhile (an ack, or the sweep): what this request stored is gone too.
  if (!now) throw wrongOffset(0);
  finish(req, res, now);
}

async function dropIfEmpty(ctx: HubContext, cid: string): Promise<void> {
  const s = await ctx.storage.blobs.status(cid).catch(() => undefined);
  if (s && s.received === 0 && !s.complete) await ctx.blobs.delete([cid]).catch(() => {});
}

/** 200 with the blob's progress; a body not read whole (a blob complete already) is not read on. */
function finish(req: IncomingMessage, res: ServerResponse, s: BlobStatus): void {
  const headers: Record<string, string> = {};
  dropRest(req, headers);
  send(res, 200, answer(s), 'application/json', headers);
}

/**
 * Reads the body from `offset` (a piece boundary: `received` always is), storing each piece once whole,
 * the last (shorter) one once it completes the blob: the blob's `received` after the body. A piece is
 * stored while the next one fills (pieces are stored in order, one at a time): waiting for each store
 * before reading on held a 64 MiB upload ~0.3 s of its ~0.5 s (measured). So an upload holds at most two
 * pieces, the one being stored and the one being filled, counted in the hub's piece budget under `client`
 * (503 BUSY when full).
 */
async function receive(
  ctx: HubContext,
  client: string,
  req: IncomingMessage,
  cid: string,
  /** The blob's record as the upload found it: its size, and its creation (which the stored pieces name). */
  blob: BlobStatus,
  offset: number,
  hash: Hash | null,
  /** Where the bytes stored (and hashed) reach, as pieces are stored. */
  upTo: { at: number },
) {
  const size = blob.size;
  if (offset === size) return offset;
  const pieceAt = (at: number) => Math.min(BLOB_PIECE, size - at);
  /** Where the pieces whole so far reach: stored (up to `upTo.at`), or being stored. */
  let taken = offset;
  let want = pieceAt(offset);
  // The piece being filled: the bytes come as they arrived, counted in the budget as they are held (a slow
  // upload holds what it sent, not a whole piece).
  let parts: Buffer[] = [];
  let fill = 0;
  // The piece being stored, if any. Its failure is heard when the next piece is whole, or at the end.
  let storing: Promise<void> | null = null;
  /** Stores a whole piece, then hashes it (a kept hash covers exactly the bytes stored), then lets it go. */
  const storePiece = async (piece: Buffer[], at: number, length: number) => {
    try {
      const reached = await store(ctx, cid, blob.created, at, piece);
      for (const part of piece) hash?.update(part);
      upTo.at = reached;
    } finally {
      ctx.blobs.pieces.give(client, length);
    }
    // The whole piece, once its parts are let go: the collection need not copy them.
    ctx.blobs.received.note(length);
  };
  try {
    for await (const chunk of chunks(req, ctx.blobs.limits.stallMs)) {
      for (let pos = 0; pos < chunk.length; ) {
        if (taken === size) throw badBlob(`the body goes past the blob's ${size} bytes`);
        const n = Math.min(chunk.length - pos, want - fill);
        if (!ctx.blobs.pieces.take(client, n))
          throw new HubError(503, 'BUSY', 'the hub is receiving too many blobs at once; retry shortly');
        parts.push(chunk.subarray(pos, pos + n));
        fill += n;
        pos += n;
        if (fill < want) continue;
        // Pieces are stored in order: the one before first. The parts as they came, never copied into one.
        await storing;
        storing = storePiece(parts, taken, fill);
        // Heard above or below; until then its failure must not count as unhandled (it would end the hub).
        storing.catch(() => {});
        taken += fill;
        parts = [];
        fill = 0;
        if (taken < size) want = pieceAt(taken);
      }
    }
    await storing;
  } finally {
    // However the body ended, the piece being stored has landed or failed before `upTo` and the hash are
    // read (a kept hash covers exactly the bytes stored).
    await storing?.catch(() => {});
    ctx.blobs.pieces.give(client, fill);
  }
  return upTo.at;
}

/**
 * The body's chunks as they come (one at a time: the socket waits while a whole piece waits for the one
 * before it to be stored). 408 BODY_TIMEOUT when none comes for `stallMs` while one is awaited, 400 when
 * the connection drops. The request is never destroyed here, so a refusal is still answered (refuse() then
 * closes the connection).
 */
async function* chunks(req: IncomingMessage, stallMs: number): AsyncGenerator<Buffer> {
  const it = req.iterator({ destroyOnReturn: false }) as AsyncIterator<Buffer>;
  // Once the timer fired, every wait ends with the stall. Not one promise of it raced against each chunk:
  // each race would leave a reaction on it holding that chunk until the body ended (see unlessClosed).
  let stall: HubError | null = null;
  let onStall: ((err: HubError) => void) | null = null;
  const timer = setTimeout(() => {
    stall = new HubError(408, 'BODY_TIMEOUT', `no byte of the blob came for ${stallMs / 1000} s`);
    onStall?.(stall);
  }, stallMs);
  // A piece buffer is held while its piece fills: a piece must fill at the least rate (a byte now and then
  // must not hold one for ever, or 256 such uploads would hold them all).
  const started = Date.now();
  let bytes = 0;
  try {
    for (;;) {
      timer.refresh();
      const late = Date.now() - started - PIECE_MS * Math.floor(bytes / BLOB_PIECE + 1);
      if (late > 0)
        throw new HubError(408, 'BODY_TIMEOUT', `the blob came slower than 1 MiB per ${PIECE_MS / 1000} s; its whole pieces are kept`);
      const next = it.next();
      next.catch(() => {});
      let step: IteratorResult<Buffer>;
      try {
        step = await new Promise<IteratorResult<Buffer>>((resolve, reject) => {
          if (stall) return reject(stall);
          onStall = reject;
          next.then(resolve, reject);
        });
      } catch (err) {
        if (err instanceof HubError) throw err;
        throw new HubError(400, 'BAD_REQUEST', 'the request ended before its body');
      } finally {
        onStall = null;
      }
      if (step.done) break;
      bytes += step.value.length;
      yield step.value;
    }
  } finally {
    clearTimeout(timer);
    // Its listeners off the request (not destroyed): a refusal's drain of the rest can then flow.
    void it.return?.().catch(() => {});
  }
  if (!req.complete) throw new HubError(400, 'BAD_REQUEST', 'the request ended before its body');
}

/**
 * Stores one whole piece at `at` of the blob record begun at `created`: the new `received`, or 409 when
 * another upload moved it (or it is gone).
 */
async function store(ctx: HubContext, cid: string, created: number, at: number, piece: readonly Buffer[]): Promise<number> {
  const received = await ctx.storage.blobs.writePiece(cid, at / BLOB_PIECE, piece, ctx.now());
  if (received !== null) {
    ctx.blobs.moved(cid, { created, at, parts: piece });
    return received;
  }
  throw wrongOffset((await ctx.storage.blobs.status(cid))?.received ?? 0);
}

/** `Range: bytes=N-` → N; null for no Range (another form is ignored, as HTTP allows: the whole blob). */
function rangeStart(req: IncomingMessage): number | null {
  const m = /^bytes=([0-9]{1,16})-$/.exec(req.headers.range ?? '');
  return m ? Number(m[1]) : null;
}

/** How often a download following an upload asks the storage again (pieces stored through another replica). */
const FOLLOW_POLL_MS = 200;

/**
 * How often a download records how far it got (`served`: a hint for the status, which `anet call` polls each
 * second for its progress). Not at every piece: that was a storage write per MiB (an UPDATE on PostgreSQL).
 */
const SERVED_EVERY_MS = 250;

/** Where a download got, written to storage at most every SERVED_EVERY_MS (and at the latest that long after), and when flushed. */
interface ServedMark {
  note(at: number): void;
  flush(): void;
}

function servedMark(ctx: HubContext, cid: string): ServedMark {
  let written = 0;
  let at = 0;
  let writtenAt = 0;
  let later: NodeJS.Timeout | null = null;
  const write = () => {
    if (later) clearTimeout(later);
    later = null;
    if (at <= written) return;
    written = at;
    writtenAt = Date.now();
    void ctx.storage.blobs.setServed(cid, at).catch(() => {});
  };
  return {
    note(to) {
      at = Math.max(at, to);
      const wait = SERVED_EVERY_MS - (Date.now() - writtenAt);
      if (wait <= 0) write();
      // Written within the period even if no other piece follows (a download caught up with its upload).
      else if (!later) later = setTimeout(write, wait).unref();
    },
    flush: write,
  };
}

/**
 * GET /blobs/<cid>: the ciphertext from the start or `Range: bytes=N-`. A blob still being uploaded is
 * followed: what is stored goes at once, then each piece as it is stored, so a recipient reads while the
 * sender uploads. Its last piece goes only once the whole blob is in and its digest checked. A follower
 * that sees no new piece for the upload stall period (30 s), or the blob deleted, is cut off before its
 * content-length: the client resumes with Range, or learns the blob is gone.
 */
async function download(ctx: HubContext, req: IncomingMessage, res: ServerResponse, cid: string): Promise<void> {
  digestOf(cid);
  // Followed from before its first status is read: a piece stored at any point after it wakes the download.
  const follow = ctx.blobs.follow(cid);
  try {
    await downloadFollowing(ctx, req, res, cid, follow);
  } finally {
    follow.close();
  }
}

async function downloadFollowing(ctx: HubContext, req: IncomingMessage, res: ServerResponse, cid: string, follow: Follow): Promise<void> {
  const s = await ctx.storage.blobs.status(cid);
  // An empty blob has nothing to follow: its one PUT checks it at once (a 200 of no bytes before that
  // check would be whole, and unchecked).
  if (!s || (s.size === 0 && !s.complete)) throw noBlob(cid);
  const from = rangeStart(req);
  if (from !== null && from >= s.size)
    return send(res, 416, { error: { code: 'BAD_RANGE', message: `blob ${cid} has ${s.size} bytes` } }, 'application/json', {
      'content-range': `bytes */${s.size}`,
    });
  const start = from ?? 0;
  const headers: Record<string, string> = {
    'content-type': 'application/octet-stream',
    'cache-control': 'no-store',
    'content-length': String(s.size - start),
    'accept-ranges': 'bytes',
  };
  if (from !== null) headers['content-range'] = `bytes ${from}-${s.size - 1}/${s.size}`;
  res.writeHead(from === null ? 200 : 206, headers);
  // Headers at once: a follower with nothing to send yet still learns the download began (a cut-off is
  // then a body cut short, not a connection that never answered).
  res.flushHeaders();
  const stallMs = ctx.blobs.limits.stallMs;
  const pool: PiecePool = { free: [], pooled: new WeakSet() };
  let at = start;
  let moved = Date.now();
  const served = servedMark(ctx, cid);
  // However the download ends, how far it got is written.
  void closed(res).then(served.flush);
  for (let now = s; ; ) {
    const upTo = servable(now);
    if (at < upTo) {
      at = await sendPieces(ctx, res, cid, at, upTo, stallMs, pool, served);
      moved = Date.now();
    }
    if (res.destroyed) return;
    if (now.complete && at === s.size) return void res.end();
    if (Date.now() - moved >= stallMs) return void res.destroy();
    // At once when the blob changed while this download was sending.
    await unlessClosed(follow.wait(FOLLOW_POLL_MS), res);
    const piece = follow.take();
    const next = await ctx.storage.blobs.status(cid);
    // Deleted (its upload gave up, its digest failed, an ack): the client's resume is answered 404. Or
    // deleted and begun again meanwhile: another upload, whose bytes this download never promised.
    if (!next || !sameBlob(next, s) || res.destroyed) return void res.destroy();
    now = next;
    // The piece this download needs next, stored on this process since it last looked into the record it
    // follows (not one deleted, whose bytes were never checked, and begun again meanwhile): sent as it
    // arrived, not read back. The last piece waits for the digest check, above.
    if (piece && piece.created === s.created && piece.at === at) {
      const length = piece.parts.reduce((n, p) => n + p.length, 0);
      if (at + length < s.size) {
        at = await sendParts(res, at, piece.parts, length, stallMs, served);
        moved = Date.now();
      }
    }
  }
}

/** The same blob record (not one deleted and begun again under its address). */
const sameBlob = (a: BlobStatus, b: BlobStatus) => a.created === b.created && a.size === b.size;

/**
 * Waits for the response to drain; a client that takes nothing for the stall period is cut off (it would
 * otherwise hold the blob's file open for ever, also once the blob is deleted).
 */
async function drained(res: ServerResponse, stallMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, stallMs);
  });
  await Promise.race([drainedOrClosed(res), late]);
  clearTimeout(timer);
  if (res.writableNeedDrain) res.destroy();
}

/** Writes a piece's parts as the socket drains: the offset after it. */
async function sendParts(res: ServerResponse, at: number, parts: readonly Buffer[], length: number, stallMs: number, served: ServedMark) {
  // One write of all the parts (one syscall per piece, not one per 64 KiB part as they arrived).
  res.cork();
  let flowing = true;
  for (const part of parts) flowing = res.write(part);
  res.uncork();
  if (!flowing) await drained(res, stallMs);
  served.note(at + length);
  return at + length;
}

/** The bytes of a blob a download may have now: all once complete, else the whole pieces stored but its last. */
const servable = (s: BlobStatus) => (s.complete ? s.size : s.received === s.size ? s.size - lastPiece(s.size) : s.received);
const lastPiece = (size: number) => (size === 0 ? 0 : size - Math.floor((size - 1) / BLOB_PIECE) * BLOB_PIECE);

/** A download's piece buffers: those free again, and which buffers are the pool's. */
interface PiecePool {
  free: Buffer[];
  pooled: WeakSet<ArrayBufferLike>;
}

/**
 * Streams the stored bytes [at, upTo) as the socket drains: the offset reached. Pieces read from files go
 * into the download's buffers, each reused once the socket has taken it (two or three at most).
 */
async function sendPieces(
  ctx: HubContext,
  res: ServerResponse,
  cid: string,
  at: number,
  upTo: number,
  stallMs: number,
  pool: PiecePool,
  served: ServedMark,
): Promise<number> {
  const first = Math.floor(at / BLOB_PIECE);
  let pos = first * BLOB_PIECE;
  const { free, pooled } = pool;
  const into = () => {
    const buf = free.pop() ?? Buffer.allocUnsafeSlow(BLOB_PIECE);
    pooled.add(buf.buffer);
    return buf;
  };
  for await (const piece of ctx.storage.blobs.read(cid, first, into)) {
    if (res.destroyed) break;
    const end = Math.min(pos + piece.length, upTo);
    const part = Buffer.from(piece.buffer, piece.byteOffset + (at - pos), end - at);
    pos += piece.length;
    at = end;
    // Back to the pool once the socket took it (a store's fresh piece is not a pool's: left to the GC).
    const taken = () => {
      if (pooled.has(piece.buffer)) free.push(Buffer.from(piece.buffer, 0, BLOB_PIECE));
    };
    if (!res.write(part, taken)) await drained(res, stallMs);
    // How far any download got, in storage so any replica answers it.
    served.note(at);
    if (at >= upTo) break;
  }
  return at;
}
