// The hub's blobs (issue 20, PROTOCOL §8.11): file ciphertexts uploaded under their content address, kept
// in the hub's storage (src/hub/storage: files under the data dir, or 1 MiB rows in PostgreSQL) until a
// signed acknowledgement names them, the mailbox TTL ends, or, incomplete, they get no piece for an hour.
// This file holds what the routes (src/hub/blob-routes.ts) need beyond one storage call: the bounds (the
// total, counted in storage and shared by replicas; the uploader's share, in this process's memory only,
// as the relay's share of kept mail: the hub never writes who uploaded what), the digest check of a
// complete blob, and the sweep.
import { createHash, type Hash } from 'node:crypto';
import { BLOB_IDLE_MS, BLOB_PIECE, BLOB_TOTAL_BYTES, BLOB_UPLOADER_BYTES } from '../protocol/blob-address.js';
import { mib } from '../protocol/relay.js';
import { Budget } from './budget.js';
import { HubError } from './http.js';
import { blobCharge, type BlobStatus, type BlobStore } from './storage/types.js';
import { youngGcEvery } from '../util/young-gc.js';

/** A piece an upload just stored: the record it went into (its creation), where it starts in the blob, and its bytes as they arrived. */
export interface StoredPiece {
  created: number;
  at: number;
  parts: readonly Buffer[];
}

export interface BlobLimits {
  /** Bytes of blobs kept in all (hub option `blobBytes`). */
  totalBytes: number;
  /** Bytes of blobs one client may have kept or in progress on this process. */
  perUploader: number;
  /** A blob is deleted this long after it was begun (the mailbox TTL). */
  ttlMs: number;
  /** An incomplete blob with no new piece for this long is deleted. */
  idleMs: number;
  /** An upload that sends no byte for this long is dropped (its whole pieces stay). */
  stallMs: number;
}

export const DEFAULT_BLOB_LIMITS: Omit<BlobLimits, 'ttlMs'> = {
  totalBytes: BLOB_TOTAL_BYTES,
  perUploader: BLOB_UPLOADER_BYTES,
  idleMs: BLOB_IDLE_MS,
  stallMs: 30_000,
};

/**
 * Piece buffers of uploads being received, in memory (each upload holds at most two pieces: one being
 * stored, the next being filled): in all, and per client, so many slow uploads cannot fill the hub's memory.
 */
const PIECE_BUFFERS = 256 * BLOB_PIECE;
const PIECE_BUFFERS_PER_CLIENT = 64 * BLOB_PIECE;
/** Running hashes kept between an upload's requests (see `keepHash`); past this many the oldest goes. */
const KEPT_HASHES = 1024;

/** The digest so far of an upload's bytes [0, at) of one blob record (its created and size). */
interface RunningHash {
  at: number;
  created: number;
  size: number;
  hash: Hash;
}

/** A bound a blob would pass: 429 BLOB_QUOTA, naming which and its figure. */
const quota = (message: string) => new HubError(429, 'BLOB_QUOTA', message);

export class Blobs {
  /** cid → the client whose upload began it, and what it counts (memory only, this process's uploads). */
  private readonly shares = new Map<string, { client: string; n: number }>();
  private readonly byClient = new Map<string, number>();
  /** Piece buffers being filled (see PIECE_BUFFERS). */
  readonly pieces = new Budget(PIECE_BUFFERS, PIECE_BUFFERS_PER_CLIENT);
  /** Upload bytes read from sockets and stored as whole pieces: the young generation is collected every 8 MiB of them (src/util/young-gc.ts). */
  readonly received = youngGcEvery(8 * BLOB_PIECE);
  /** When a full total last made this process sweep at once (at most once a second). */
  private lastFullSweep = 0;
  /** Downloads following an upload on this process, by cid: woken when it stores a piece, completes or goes. */
  private readonly followers = new Map<string, Set<(piece?: StoredPiece) => void>>();
  /**
   * cid → the running hash of an upload that stopped before its end (memory only, this process's). Every
   * delete and sweep through this process forgets it; a record deleted and begun again through another
   * replica is told apart by its created time and size (the same millisecond and size would be taken for
   * the same record: the provider's chunk check still refuses such bytes, and a stranger gains nothing a
   * DELETE does not already give).
   */
  private readonly hashes = new Map<string, RunningHash>();
  /** Complete blobs whose digest check read their bytes back from storage (no running hash). */
  readBacks = 0;

  constructor(
    readonly store: BlobStore,
    private readonly now: () => number,
    readonly limits: BlobLimits,
  ) {}

  /**
   * Begins the blob `cid` for `client` with `size` bytes (its share and the total counted); one begun
   * meanwhile is answered as it is stored (whatever its size: the route compares). 429 BLOB_QUOTA past a
   * bound.
   */
  async begin(cid: string, size: number, client: string): Promise<BlobStatus> {
    const n = blobCharge(size);
    // Another upload of this process is beginning it now: that one holds the share.
    const sharing = !this.shares.has(cid);
    if (sharing) this.take(cid, client, n);
    try {
      const begun = await this.beginStored(cid, size);
      if (begun === 'full')
        throw quota(
          `the hub keeps ${mib(this.limits.totalBytes)} of blobs in all, its total, and has no room for ${mib(n)} more; retry later`,
        );
      if (!begun.created && sharing) this.release(cid);
      return begun.status;
    } catch (err) {
      if (sharing) this.release(cid);
      throw err;
    }
  }

  /** Counts `n` bytes for `client`'s new blob, before any await: its racing uploads cannot pass its share together. */
  private take(cid: string, client: string, n: number): void {
    const mine = this.byClient.get(client) ?? 0;
    if (mine + n > this.limits.perUploader)
      throw quota(
        `this client's blobs on this hub would hold ${mib(mine + n)}, over its ${mib(this.limits.perUploader)} (per uploader); retry once some are acknowledged`,
      );
    this.shares.set(cid, { client, n });
    this.byClient.set(client, mine + n);
  }

  /** A full total is swept of expired blobs once, then asked again. */
  private async beginStored(cid: string, size: number) {
    const now = this.now();
    const args = [cid, size, now, now + this.limits.ttlMs, this.limits.totalBytes] as const;
    const begun = await this.store.begin(...args);
    if (begun !== 'full' || now - this.lastFullSweep < 1000) return begun;
    this.lastFullSweep = now;
    await this.sweep();
    return this.store.begin(...args);
  }

  /**
   * The hash an upload of `s`'s blob from `offset` continues: a new one at 0; at another offset, the one an
   * earlier upload of the same record kept when it stopped there (taken: one upload goes on with it), else
   * null (the blob is read back once complete: pieces stored through another replica, a restart).
   */
  hashFrom(cid: string, s: BlobStatus, offset: number): Hash | null {
    if (offset === 0) return createHash('sha256');
    const kept = this.hashes.get(cid);
    this.hashes.delete(cid);
    return kept && kept.at === offset && kept.created === s.created && kept.size === s.size ? kept.hash : null;
  }

  /**
   * Keeps the hash of an upload that stopped at `at` before the blob's end (a dropped connection, or the
   * caller's head first and the rest after): the next upload from `at` goes on with it, so the complete
   * blob needs no read-back for its digest check.
   */
  keepHash(cid: string, s: BlobStatus, at: number, hash: Hash): void {
    this.hashes.delete(cid);
    if (this.hashes.size >= KEPT_HASHES) this.hashes.delete(this.hashes.keys().next().value!);
    this.hashes.set(cid, { at, created: s.created, size: s.size, hash });
  }

  /**
   * Checks a blob whose bytes are all in against its address — `hashed`, the digest of a whole upload
   * taken as it came, or else its bytes read back from storage (a resumed upload has no running hash):
   * marked complete and true, or deleted and false.
   */
  async verify(cid: string, digest: Uint8Array, hashed?: Buffer): Promise<boolean> {
    this.hashes.delete(cid);
    if (!hashed) {
      this.readBacks++;
      const hash = createHash('sha256');
      for await (const piece of this.store.read(cid, 0)) hash.update(piece);
      hashed = hash.digest();
    }
    if (hashed.equals(digest)) {
      const done = await this.store.complete(cid);
      this.moved(cid);
      return done;
    }
    await this.delete([cid]);
    return false;
  }

  /** Deletes the named blobs (an acknowledgement): how many were kept. Their uploaders' shares go back. */
  async delete(cids: string[]): Promise<number> {
    const gone = await this.store.delete(cids);
    for (const cid of cids) {
      this.forget(cid);
      this.moved(cid);
    }
    return gone.length;
  }

  /**
   * Blob `cid` changed on this process (a piece stored, complete, deleted): the downloads following it read
   * on. A piece just stored comes along (`piece`), so a follower at its offset sends it without reading it back.
   */
  moved(cid: string, piece?: StoredPiece): void {
    for (const wake of this.followers.get(cid) ?? []) wake(piece);
  }

  /**
   * Follows blob `cid` on this process for one download, from now until `close()`: each change (a piece
   * stored, complete, deleted) is remembered until the download looks, so one that comes while it is busy
   * sending is not missed (it would wait for a change that never comes: ~140 ms at a blob's end, measured).
   */
  follow(cid: string): Follow {
    const set = this.followers.get(cid) ?? new Set();
    this.followers.set(cid, set);
    const follow = new Follow(() => {
      set.delete(follow.moved);
      if (set.size === 0 && this.followers.get(cid) === set) this.followers.delete(cid);
    });
    set.add(follow.moved);
    return follow;
  }

  /**
   * Deletes blobs past their TTL and incomplete ones idle for idleMs (the relay's sweep calls it every
   * minute), and gives back the shares of blobs gone, also those deleted through another replica.
   */
  async sweep(): Promise<number> {
    const now = this.now();
    const gone = await this.store.sweep(now, now - this.limits.idleMs);
    for (const cid of gone) this.forget(cid);
    const held = [...this.shares.keys()];
    const kept = await this.store.have(held);
    for (const cid of held) if (!kept.has(cid)) this.release(cid);
    return gone.length;
  }

  /** What `client`'s blobs count on this process now. */
  sharedBy(client: string): number {
    return this.byClient.get(client) ?? 0;
  }

  /** A blob gone from the storage: its uploader's share goes back, and any hash kept for it. */
  private forget(cid: string): void {
    this.release(cid);
    this.hashes.delete(cid);
  }

  private release(cid: string): void {
    const share = this.shares.get(cid);
    if (!share) return;
    this.shares.delete(cid);
    const left = (this.byClient.get(share.client) ?? 0) - share.n;
    if (left > 0) this.byClient.set(share.client, left);
    else this.byClient.delete(share.client);
  }
}

/**
 * One download's view of its blob's changes on this process: whether any came since it last looked, and
 * the last piece stored (sent as it arrived when it is the one the download needs next). It holds that one
 * piece at most, until the download looks or closes.
 */
export class Follow {
  private changed = false;
  private piece: StoredPiece | undefined;
  private wake: (() => void) | null = null;

  constructor(private readonly stop: () => void) {}

  /** Told of a change: `piece` when it was a piece stored. */
  readonly moved = (piece?: StoredPiece): void => {
    this.changed = true;
    // A change with no piece (complete, deleted) leaves the last one: the status tells the rest.
    if (piece) this.piece = piece;
    this.wake?.();
  };

  /**
   * Resolves once a change came since the last `take()` (at once if one did), or after `ms` at most: an
   * upload through another replica wakes nobody here, so a follower asks the storage again that often.
   */
  wait(ms: number): Promise<void> {
    // One waiter at a time: an earlier wait still pending ends now (its timer with it).
    this.wake?.();
    if (this.changed) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wake = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wake = done;
    });
  }

  /** The last piece stored since the last look, if any, and the changes forgotten. */
  take(): StoredPiece | undefined {
    const piece = this.piece;
    this.changed = false;
    this.piece = undefined;
    return piece;
  }

  close(): void {
    this.wake?.();
    this.stop();
  }
}
