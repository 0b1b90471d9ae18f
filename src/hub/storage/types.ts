// The hub's storage (issue 19): everything the hub keeps, behind one interface with two backends. The
// embedded LevelDB backend (src/hub/storage/level.ts) is the default and serves one process; the
// PostgreSQL backend (src/hub/storage/postgres.ts) is shared by any number of replicas, so nothing here
// may rely on an in-process queue or lock for correctness: a backend makes each method atomic on its own
// (a LevelDB backend may use its one process's queue; PostgreSQL uses transactions and unique keys).
//
// What the hub keeps: agents (KEL, card wire, name, high-water mark, encryption key set) and the
// directory's index over their cards; invites (by the digest of their token); seen request nonces, until
// they are too old to pass the clock window; the credits ledger; sealed envelopes waiting for offline
// recipients; and blobs, file ciphertexts in transit (issue 20). What it never keeps: who sent an envelope
// (WIRE §4) or uploaded a blob, a plaintext byte, what a payment bought.

/** An agent as the hub holds it. */
export interface AgentRecord {
  aid: string;
  name: string;
  kel: Uint8Array;
  /** The card exactly as the node signed it; null once withdrawn. */
  card: string | null;
  /** Highest card seq accepted, and the digest of that card (SEQ_ROLLBACK / SEQ_FORK survive restarts). */
  seq: string | null;
  digest: string | null;
  /** The node's signed encryption key set (WIRE §4), verified on entry. */
  keys?: Uint8Array;
  updatedAt: number;
}

/**
 * An operator's invitation to register one new AID (`anet hub invite`, PROTOCOL §8.4), kept under the
 * digest of its token: the store holds no token anyone could use.
 */
export interface Invite {
  createdAt: number;
  /** The AID whose first registration used it, and when; null while unused. */
  usedBy: string | null;
  usedAt: number | null;
}

/** A directory search (GET /agents): all words must match; `cursor` is the `next` of the page before. */
export interface SearchQuery {
  words: string[];
  skill: string | null;
  tag: string | null;
  limit: number;
  cursor: string | null;
}

/** One page of a search, best match first; `next` continues it (null on the last page). */
export interface SearchPage {
  agents: AgentRecord[];
  next: string | null;
}

export interface AgentStore {
  get(aid: string): Promise<AgentRecord | undefined>;
  /** Writes a record (and the directory's index of its card), whatever was there. */
  put(rec: AgentRecord): Promise<void>;
  /**
   * Reads `aid`'s record and writes what `fn` makes of it (null: nothing), atomically against every other
   * update of that AID on any replica: a card published and a key set put at the same moment both stay,
   * and a KEL or card check is made against the record it replaces. `fn` may run more than once (after a
   * lost race), so it only decides; it throws to refuse. Answers what was written, or null.
   */
  update(aid: string, fn: (current: AgentRecord | undefined) => AgentRecord | null): Promise<AgentRecord | null>;
  /**
   * Writes the record of a new AID and spends the invite (by its key) in one atomic step: of any number
   * of registrations racing with one invite, on any replica, one gets 'ok'. 'exists' (nothing written, the
   * invite not spent) when the AID was registered meanwhile: its registration is then an update.
   */
  admit(rec: AgentRecord, inviteKey: string, now: number): Promise<'ok' | 'unknown' | 'used' | 'exists'>;
  /** Writes an invite (synced). */
  invite(key: string, invite: Invite): Promise<void>;
  search(query: SearchQuery): Promise<SearchPage>;
  /** Whether `aid` is registered with encryption keys published (the relay keeps mail for these only). */
  isRecipient(aid: string): Promise<boolean>;
}

export interface NonceStore {
  /**
   * Records `<aid, nonce>` as seen at `time`: true if it was not seen before, false if it was. Atomic
   * across replicas: of copies of one signed request arriving anywhere, one claim is true.
   */
  claim(aid: string, nonce: string, time: number): Promise<boolean>;
  /** Forgets nonces seen before `before` (their requests would fail the clock window anyway). */
  prune(before: number): Promise<void>;
}

// ---- The ledger (src/hub/ledger.ts decides; a backend only reads and writes atomically) ----

/** Per AID: balance, sum of its open holds as payer (decimal strings), its last history seq and its hash. */
export interface AccountRecord {
  balance: string;
  held: string;
  seq: number;
  /** sha256 (hex) of the stored bytes of the entry at `seq`; absent while only older versions wrote. */
  head?: string;
}

export type HoldState = 'held' | 'captured' | 'released' | 'expired' | 'void';

/** Per authorization nonce: the hold and its state (a `void` tombstone when released unseen). */
export interface HoldRecord {
  /** null for a `void` tombstone: the hub never saw the authorization. */
  from: string | null;
  to: string;
  amount: string;
  state: HoldState;
  at: number;
  /** When an open hold is released to the payer; null for a tombstone. */
  expires: number | null;
  tx: string;
}

/** Per op key (`mint:<nonce>`, `hold:<nonce>`, `settle:<hold>`): the digest of its body and its answer. */
export interface OpRecord {
  digest: string;
  answer: unknown;
}

/**
 * What a ledger transaction is about to read, declared before it reads: its op record, holds (locked first,
 * in nonce order), accounts (then, in AID order) with their holds due at `at`. A backend may fetch all of
 * it at once; the reads answer exactly as they would without it, and what was not declared is read as asked.
 */
export interface LedgerPlan {
  /** The time the transaction's dueOf reads will ask for. */
  at: number;
  op?: string;
  holds?: string[];
  accounts?: string[];
  /** Also the accounts of `holds` that are open: their payer's, or their payer's and payee's. */
  parties?: 'payer' | 'both';
  /**
   * The signed request's nonce, claimed (as NonceStore.claim) in the transaction, which then commits the
   * claim also when it writes nothing else or its function throws (a refused request was still taken).
   * `taken` is set once the claim is stored: the caller claims a nonce no transaction took (see auth.ts).
   */
  claim?: RequestNonce;
}

/** A signed request's nonce (its signature and time checked), to be claimed once. */
export interface RequestNonce {
  aid: string;
  nonce: string;
  time: number;
  taken?: boolean;
}

/** What one ledger transaction reads (through its backend's transaction: every read is part of it). */
export interface LedgerReads {
  /**
   * Declares what the transaction will read (see LedgerPlan): one round trip instead of one a read. False
   * when the plan's claim finds its nonce seen before (the request is a replay; nothing else was read).
   */
  prefetch(plan: LedgerPlan): Promise<boolean>;
  account(aid: string): Promise<AccountRecord | undefined>;
  /** The stored bytes of an account's history entry. */
  entry(aid: string, seq: number): Promise<Uint8Array | undefined>;
  hold(nonce: string): Promise<HoldRecord | undefined>;
  op(key: string): Promise<OpRecord | undefined>;
  /** The credits minted in all (a decimal string; '0' before the first mint). */
  minted(): Promise<string>;
  /** The open holds of `payer` whose expiry is at or before `now` (their nonces). */
  dueOf(payer: string, now: number): Promise<string[]>;
}

/** What one ledger transaction writes, all or nothing. */
export interface LedgerWrites {
  accounts: Map<string, AccountRecord>;
  /** New history entries, as stored bytes (packed once, hashed over exactly these bytes). */
  entries: { aid: string; seq: number; bytes: Uint8Array }[];
  /** Holds written; a backend keeps the open ones indexed by expiry (for dueOf and due). */
  holds: Map<string, HoldRecord>;
  op: ({ key: string } & OpRecord) | null;
  minted: string | null;
}

/** How a backend's ledger transactions ran, counted since it opened (PostgreSQL batches them: ledger-batch.ts). */
export interface LedgerTransactionCounts {
  /** Transactions of one op. */
  single: number;
  /** Transactions of several ops, and the ops they carried. */
  batches: number;
  batchedOps: number;
  /** Batches the database failed, whose ops then ran one by one. */
  fallbacks: number;
}

export interface LedgerStore {
  /** Counts of the transactions run (a backend that never batches leaves it out). */
  readonly counts?: LedgerTransactionCounts;
  /**
   * Runs `fn` as one serialisable transaction and commits its writes (synced) atomically; returns its
   * answer. `fn` may run more than once (a backend retries a transaction that lost a race), so it must
   * not act outside the transaction; it throws to write nothing.
   */
  transact<T>(fn: (reads: LedgerReads) => Promise<{ answer: T; writes: LedgerWrites | null }>): Promise<T>;
  /** Open holds whose expiry is at or before `now`, for the periodic sweep (at most `limit`). */
  due(now: number, limit: number): Promise<string[]>;
  /** The newest `limit` history entries of an account, oldest first, as stored bytes. */
  recent(aid: string, limit: number): Promise<Uint8Array[]>;
  /** Every account, for totals and checks. */
  accounts(): AsyncIterable<[string, AccountRecord]>;
  /** Every history entry in (aid, seq) order, for the full check. */
  history(): AsyncIterable<{ aid: string; seq: number; bytes: Uint8Array }>;
  /** Entries by (aid, seq), undefined where there is none (the fast check reads two per account). */
  entries(keys: { aid: string; seq: number }[]): Promise<(Uint8Array | undefined)[]>;
  /** The sum of open holds (for totals). */
  heldTotal(): Promise<bigint>;
  minted(): Promise<string>;
}

// ---- Mailboxes: sealed envelopes for offline recipients, until acknowledged or expired ----

export interface MailboxLimits {
  /** Envelopes kept for one recipient. */
  perRecipient: number;
  /** Their bytes in all. */
  perRecipientBytes: number;
  /** Bytes kept for all recipients together (sends are anonymous and may name any recipient). */
  totalBytes: number;
}

/** One kept envelope: `id` is the hex sha256 of its bytes (what the recipient acknowledges). */
export interface Mail {
  id: string;
  bytes: Uint8Array;
}

export interface MailboxStore {
  /**
   * Keeps `bytes` for `to` until `expires`: 'kept' (also when an envelope with the same id is kept
   * already), or 'full' when a bound would be passed. `onKept` is called once a new envelope has been
   * counted and its write issued, before that write lands: the relay pushes it then (an `ack` of it
   * waits for the write). A store that decides only as its write ends never calls it.
   */
  put(to: string, id: string, bytes: Uint8Array, expires: number, limits: MailboxLimits, onKept?: () => void): Promise<'kept' | 'full'>;
  /** The unexpired envelopes kept for `to`, oldest first. */
  list(to: string, now: number): Promise<Mail[]>;
  /** Deletes the named envelopes of `to` (ids it does not hold are ignored); how many went. */
  ack(to: string, ids: string[]): Promise<number>;
  /** Deletes every envelope expired at `now`; how many went. */
  sweep(now: number): Promise<number>;
  /** Envelopes and bytes kept, in all. */
  size(): Promise<{ envelopes: number; bytes: number }>;
}

// ---- Blobs: file ciphertexts under their content address (issue 20, PROTOCOL §8.11) ----

/**
 * What the hub keeps of a blob besides its bytes. Never who uploaded it, nor any task or envelope it
 * belongs to: only its address (the key), sizes, progress and times.
 */
export interface BlobStatus {
  /** The whole ciphertext's size, fixed when the blob is begun. */
  size: number;
  /** Bytes stored, from 0: a multiple of BLOB_PIECE, or `size` once every piece is in. */
  received: number;
  /** Every byte is in and its sha2-256 matched the address. */
  complete: boolean;
  /** The highest byte offset a download has streamed so far. */
  served: number;
  created: number;
  /** When the last piece was stored (an incomplete blob idle for BLOB_IDLE_MS is swept). */
  updated: number;
  /** When the blob is deleted, complete or not (created + the mailbox TTL). */
  expires: number;
}

/**
 * Bytes a blob counts against the bounds: its size, and at least 64 KiB, so a client cannot hold an
 * unbounded number of blob records with tiny sizes.
 */
export const blobCharge = (size: number) => Math.max(size, 64 * 1024);

export interface BlobStore {
  /**
   * Begins the blob `cid` of `size` bytes, counting blobCharge(size) in the total (atomically across
   * replicas): `created` false with the stored status when it exists already (whatever size it was begun
   * with), or 'full' when the total would pass `totalBytes`.
   */
  begin(
    cid: string,
    size: number,
    now: number,
    expires: number,
    totalBytes: number,
  ): Promise<{ status: BlobStatus; created: boolean } | 'full'>;
  status(cid: string): Promise<BlobStatus | undefined>;
  /**
   * Stores piece `index` (BLOB_PIECE bytes, or the last, shorter one) only while `received` is exactly
   * index × BLOB_PIECE and the blob is incomplete, durably before `received` moves past it: the new
   * `received`, or null when the blob is gone or another writer moved it (the offset rule: one wins).
   * The piece may come as the parts it arrived in (the hub then never copies them into one buffer).
   */
  writePiece(cid: string, index: number, bytes: PieceBytes, now: number): Promise<number | null>;
  /** Marks the blob complete once every byte is in (its digest checked by the caller); false if it is gone. */
  complete(cid: string): Promise<boolean>;
  /**
   * The stored bytes from piece `fromPiece` on, one piece at a time (nothing for an unknown blob). A store
   * that reads files reads each piece into a buffer of BLOB_PIECE bytes from `into` when given (the caller
   * hands out one it is done with: a fresh 1 MiB buffer per piece cost the hub a page fault per 4 KiB);
   * one whose bytes come fresh anyway (a database row) ignores it.
   */
  read(cid: string, fromPiece: number, into?: () => Buffer): AsyncIterable<Uint8Array>;
  /** Raises `served` to `offset` (never lowers it). */
  setServed(cid: string, offset: number): Promise<void>;
  /** Deletes the named blobs and their bytes (unknown ones are ignored): the CIDs that were kept. */
  delete(cids: string[]): Promise<string[]>;
  /**
   * Deletes every blob expired at `now`, and every incomplete one with no piece since `idleBefore`: their
   * CIDs. Also clears bytes a crash left without their blob.
   */
  sweep(now: number, idleBefore: number): Promise<string[]>;
  /** Which of `cids` are kept. */
  have(cids: string[]): Promise<Set<string>>;
  /** Blobs kept, and the bytes they count (blobCharge), in all. */
  size(): Promise<{ blobs: number; bytes: number }>;
}

/** The hub's storage: one backend's stores. */
export interface HubStorage {
  /** 'leveldb' (embedded, one process) or 'postgres' (shared by replicas). */
  readonly kind: 'leveldb' | 'postgres';
  /** Where it is, for messages: a directory, or a PostgreSQL URL without its password. */
  readonly where: string;
  readonly agents: AgentStore;
  readonly nonces: NonceStore;
  readonly ledger: LedgerStore;
  readonly mailbox: MailboxStore;
  readonly blobs: BlobStore;
  /**
   * Binds the storage to the hub identity that runs on it: recorded by the first start, checked by every
   * later one (a replica started with another identity's key file is refused in one line).
   */
  bind(hubAid: string): Promise<void>;
  close(): Promise<void>;
}

/** A storage bound to another hub identity than the one starting on it. */
export class WrongHubError extends Error {
  override name = 'WrongHubError';
  constructor(where: string, stored: string, mine: string) {
    super(
      `the hub store at ${where} belongs to hub ${stored}, not to this hub's identity ${mine}: start every replica with a copy of the same identity (copy the \`keys/\` directory and \`kel.cbor\` of the first replica's data dir)`,
    );
  }
}

/** A blob piece: one buffer, or the parts it arrived in, in order. */
export type PieceBytes = Uint8Array | readonly Uint8Array[];

/** The parts of a piece, and its length. */
export function pieceParts(bytes: PieceBytes): { parts: readonly Uint8Array[]; length: number } {
  const parts = bytes instanceof Uint8Array ? [bytes] : bytes;
  return { parts, length: parts.reduce((n, p) => n + p.length, 0) };
}
