// The node's LevelDB store (SPEC §14): one database per data dir, with sublevels for the append-only
// journal, actor snapshots, payloads (kept apart so `discard` payloads never reach the journal), the
// deadline index, and meta (the checkpoint seq). Only one process may own it.
import { Level } from 'level';
import type { AbstractSublevel } from 'abstract-level';
import { join, relative } from 'node:path';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { msgpack, pack } from './codec.js';
import { checkWriteAheadLog, type WalDamage } from './wal.js';
import { ChainCheck, linkHash, ZERO_HASH, type Damage, type Link } from './chain.js';

export class StoreLockedError extends Error {
  override name = 'StoreLockedError';
  constructor(readonly dir: string) {
    super(`another anet is running with this data dir (${dir}); stop it first, or work on a copy of the directory`);
  }
}

export class StoreMissingError extends Error {
  override name = 'StoreMissingError';
  constructor(readonly dir: string) {
    super(`no journal in ${dir}: this node has not run yet`);
  }
}

/**
 * A record of LevelDB's write-ahead log is damaged (store/wal.ts): the store is not opened, since LevelDB
 * would drop the record and the rest of its block without a word. One line: the data dir, what the record
 * holds (the first journal seq), what to do.
 */
export class StoreDamagedError extends Error {
  override name = 'StoreDamagedError';
  constructor(
    readonly dataDir: string,
    readonly file: string,
    readonly damage: WalDamage,
  ) {
    super(
      `the store of ${dataDir} is damaged: ${damage.problem} in LevelDB's write-ahead log (${file}, byte ${damage.offset})` +
        `${damage.holds ? `, holding ${damage.holds} onwards` : ''}; LevelDB would drop it and what follows it silently, so nothing was opened or changed: ` +
        `restore ${dataDir} from a backup made before the damage (\`anet replay --verify --data ${dataDir}\` stops at the same record)`,
    );
  }
}

type Sub = AbstractSublevel<Level<string, unknown>, string | Buffer | Uint8Array, string, unknown>;

/** One write of an atomic batch, to a sublevel of the store. */
export type WriteOp = { type: 'put'; sublevel: Sub; key: string; value: unknown } | { type: 'del'; sublevel: Sub; key: string };

export interface JournalEntry {
  seq: number;
  actor: string;
  kind: string;
  /** The version of the kind's transitions (src/runtime/versions.ts); absent in entries written before versions: 1. */
  version?: number;
  /** Present on an actor's first event: the input its machine was created with. */
  input?: unknown;
  event: { type: string; at: number; [key: string]: unknown };
}

export interface SnapshotRecord {
  kind: string;
  /** The version of the kind's transitions that made this state (as in JournalEntry). */
  version?: number;
  /** Journal seq of the last event this snapshot includes (snapshots are written at checkpoints). */
  seq: number;
  input: unknown;
  state: unknown;
  deadline: number | null;
}

const SEQ_WIDTH = 16;
export const seqKey = (seq: number) => seq.toString().padStart(SEQ_WIDTH, '0');
export const timeKey = (ms: number) => Math.max(0, Math.floor(ms)).toString().padStart(SEQ_WIDTH, '0');

/** abstract-level's implementer method the store writes through (see writeRaw). */
interface PrivateBatch {
  _batch(ops: RawOp[], options: { sync: boolean }): Promise<void>;
}

/**
 * A write in its stored form: the key with its sublevel's prefix, the value packed. Each op names its
 * encodings, so abstract-level's batch() passes key and bytes on untouched (see writeRaw).
 */
export type RawOp =
  | { type: 'put'; key: string; value: Buffer; keyEncoding: 'utf8'; valueEncoding: 'buffer' }
  | { type: 'del'; key: string; keyEncoding: 'utf8' };

/** A batch's options: whether LevelDB syncs its log (test/unit/store.test.ts checks that `sync` reaches it). */
const SYNCED = { sync: true };
const UNSYNCED = { sync: false };

/**
 * Writes ops in their stored form (keys with their sublevel's prefix, values packed) in one batch on the
 * root database. They go to its `_batch()`: abstract-level's documented API for implementations
 * ("Private API For Implementors"), which takes ops whose encodings are set, as these are. A batch of
 * sublevel ops made abstract-level find each op's sublevel, encodings and prefix again (~9 µs an op
 * here); the public batch() on the root still clones each op and looks up its encodings, and its
 * synchronous part cost ~80 µs a batch in bench/calls (~140 µs a call on each node), against ~20 µs for
 * `_batch()`. (The hub's mailbox, whose values are whole envelopes: 83 µs at the median per kept envelope
 * with batch(), 63–66 µs with `_batch()`.) Our stores use no hooks or write events, which only batch()
 * runs; a batch on a database that is not open is refused here, as batch() would.
 */
export async function writeRaw(db: Level<string, unknown>, raw: RawOp[], sync: boolean): Promise<void> {
  if (db.status !== 'open') throw Object.assign(new Error('Database is not open'), { code: 'LEVEL_DATABASE_NOT_OPEN' });
  await (db as unknown as PrivateBatch)._batch(raw, sync ? SYNCED : UNSYNCED);
}

export class Store {
  readonly journal: Sub;
  readonly snapshots: Sub;
  readonly payloads: Sub;
  /** `<deadline>!<actor>`: every pending deadline, so timers are re-armed after a restart. */
  readonly deadlines: Sub;
  readonly meta: Sub;
  /** Every card version this node published or saw, for audit: `<aid>!<seq>!<digest>`. */
  readonly cards: Sub;
  /** Per remote AID: the KEL last accepted (only extensions replace it) and the card high-water mark. */
  readonly peers: Sub;
  /** `<exp>!<mid hex>` and `<mid hex>`: message ids received and not yet expired (the replay guard). */
  readonly mids: Sub;
  /** Per issuer AID: the contact-level delivery credential it gave us (SPEC §7). */
  readonly contacts: Sub;
  /** Per peer AID: the contact credential we last issued it (its ksn and expiry), to renew after a rotation. */
  readonly issued: Sub;
  /** Inbound calls whose service is running now (so a restart can end them `interrupted`). */
  readonly running: Sub;
  /** Tasks this node sent, by task id: state, outcome, receipt (the caller's side). */
  readonly tasks: Sub;
  /** Text tasks waiting for the operator's `anet reply` (no local agent configured). */
  readonly inbox: Sub;
  /** Payments we authorized whose task has not ended (so a restart sends them again, same bytes). */
  readonly paying: Sub;
  /** The journal's hash chain (store/chain.ts): per event batch, keyed by its last seq, `{from, h}`. */
  readonly chain: Sub;

  /** The newest link (what the next batch chains from), its last seq, and meta `chain`: the first seq chained. */
  private chainHead: Uint8Array = ZERO_HASH;
  private chainTo: number | undefined;
  private chainFrom: number | undefined;
  private linking = false;
  /**
   * Told of each journal batch written: its seconds (the write with its fsync) and its entries. The
   * node's metrics set it (src/node/metrics.ts); the store knows nothing of them.
   */
  onJournalBatch: (seconds: number, entries: number) => void = () => {};

  private constructor(
    readonly db: Level<string, unknown>,
    readonly dir: string,
    readonly dataDir: string,
  ) {
    const sub = (name: string) => db.sublevel<string, unknown>(name, { valueEncoding: msgpack }) as Sub;
    this.journal = sub('journal');
    this.snapshots = sub('snapshots');
    this.payloads = sub('payloads');
    this.deadlines = sub('deadlines');
    this.meta = sub('meta');
    this.cards = sub('cards');
    this.peers = sub('peers');
    this.mids = sub('mids');
    this.contacts = sub('contacts');
    this.issued = sub('issued');
    this.running = sub('running');
    this.tasks = sub('tasks');
    this.inbox = sub('inbox');
    this.paying = sub('paying');
    this.chain = sub('chain');
  }

  static path(dataDir: string): string {
    return join(dataDir, 'store');
  }

  static async open(dataDir: string, opts: { create?: boolean } = {}): Promise<Store> {
    const dir = Store.path(dataDir);
    const create = opts.create ?? true;
    if (!create && !existsSync(dir)) throw new StoreMissingError(dataDir);
    const store = new Store(await openLevel(dir, dataDir, create), dir, dataDir);
    try {
      store.chainFrom = (await store.meta.get('chain')) as number | undefined;
      for await (const [key, value] of store.chain.iterator({ reverse: true, limit: 1 })) {
        store.chainHead = (value as { h: Uint8Array }).h;
        store.chainTo = Number(key);
      }
    } catch (err) {
      await store.db.close();
      throw err;
    }
    return store;
  }

  /** The first seq covered by the hash chain (meta `chain`); undefined while the journal has none. */
  get chainStart(): number | undefined {
    return this.chainFrom;
  }

  /** The links of the hash chain with last seq in (after, …], in pages (for ChainCheck). */
  links(after: number): () => Promise<Link[]> {
    const it = this.chain.iterator({ gt: seqKey(after) });
    let done = false;
    return async () => {
      if (done) return [];
      const page = (await it.nextv(1024)) as [string, { from: number; h: Uint8Array }][];
      if (page.length === 0) {
        done = true;
        await it.close();
      }
      return page.map(([key, v]) => ({ from: v.from, to: Number(key), h: v.h }));
    };
  }

  /** The seq the next journal entry gets: one past the last one written. */
  async nextSeq(): Promise<number> {
    for await (const key of this.journal.keys({ reverse: true, limit: 1 })) return Number(key) + 1;
    return 1;
  }

  /**
   * Writes ops in one atomic batch, keys already prefixed and values already packed (the bytes are the
   * sublevels' own). abstract-level's batch of sublevel ops clones, re-encodes and dispatches each op on
   * its sublevel; with the host's mix of journal, snapshot, deadline and meta ops that loop was
   * deoptimised again and again and cost more than the write itself (bench/runtime).
   */
  async write(ops: WriteOp[], opts: { sync?: boolean; link?: boolean } = {}): Promise<void> {
    const raw = new Array<RawOp>(ops.length);
    const journal = opts.link ? this.journal : null;
    const values: Buffer[] = [];
    let first = '';
    let last = '';
    for (let i = 0; i < ops.length; i++) {
      const op = ops[i]!;
      const key = op.sublevel.prefixKey(op.key, 'utf8');
      if (op.type === 'put') {
        const value = pack(op.value);
        raw[i] = { type: 'put', key, value, keyEncoding: 'utf8', valueEncoding: 'buffer' };
        if (op.sublevel === journal) {
          values.push(value);
          if (first === '') first = op.key;
          last = op.key;
        }
      } else raw[i] = { type: 'del', key, keyEncoding: 'utf8' };
    }
    if (values.length > 0) return this.writeLinked(raw, values, Number(first), Number(last), opts.sync ?? false);
    await writeRaw(this.db, raw, opts.sync ?? false);
  }

  /**
   * A batch of journal entries with its link (store/chain.ts). The host writes them one batch after the
   * other; the head moves only once the batch is written, so a failed write leaves it on the last one
   * that landed.
   */
  private async writeLinked(raw: RawOp[], values: Buffer[], from: number, to: number, sync: boolean): Promise<void> {
    if (this.linking) throw new Error('journal batches are written one at a time');
    if (to - from + 1 !== values.length || (this.chainTo !== undefined && from !== this.chainTo + 1)) {
      throw new Error(
        `journal batch #${from}–#${to} of ${values.length} entries does not continue the chain at #${(this.chainTo ?? from - 1) + 1}`,
      );
    }
    const h = linkHash(this.chainHead, values);
    raw.push({
      type: 'put',
      key: this.chain.prefixKey(seqKey(to), 'utf8'),
      value: pack({ from, h }),
      keyEncoding: 'utf8',
      valueEncoding: 'buffer',
    });
    if (this.chainFrom === undefined)
      raw.push({ type: 'put', key: this.meta.prefixKey('chain', 'utf8'), value: pack(from), keyEncoding: 'utf8', valueEncoding: 'buffer' });
    this.linking = true;
    const started = performance.now();
    try {
      await writeRaw(this.db, raw, sync);
    } finally {
      this.linking = false;
    }
    this.onJournalBatch((performance.now() - started) / 1000, values.length);
    this.chainHead = h;
    this.chainTo = to;
    this.chainFrom ??= from;
  }

  /** Ops queued for the next grouped write, the grouped write under way (settles, never rejects), and the next one. */
  private grouped: WriteOp[] = [];
  private groupWriting: Promise<void> | null = null;
  private groupQueued: Promise<void> | null = null;

  /**
   * Writes ops unsynced, in one batch with the other ops queued meanwhile: issued at once when no grouped
   * write is under way, else with the next one, issued when it lands. Records that many messages write at
   * once (replay-guard mids, the caller's task records) then cost one thread-pool round trip per group,
   * not one each: here a put's hand-off to the pool cost the event loop more than the write. Grouped
   * writes land in the order they were queued. A failed write rejects every op of its group.
   */
  writeGrouped(ops: WriteOp[]): Promise<void> {
    for (const op of ops) this.grouped.push(op);
    if (this.groupQueued) return this.groupQueued;
    if (!this.groupWriting) return this.issueGrouped();
    const queued = this.groupWriting.then(() => {
      this.groupQueued = null;
      return this.issueGrouped();
    });
    this.groupQueued = queued;
    return queued;
  }

  private issueGrouped(): Promise<void> {
    const ops = this.grouped;
    this.grouped = [];
    const write = this.write(ops);
    const settled: Promise<void> = write.then(
      () => this.groupLanded(settled),
      () => this.groupLanded(settled),
    );
    this.groupWriting = settled;
    return write;
  }

  private groupLanded(settled: Promise<void>): void {
    if (this.groupWriting === settled) this.groupWriting = null;
  }

  /** Closes the database once the grouped writes queued so far have landed (or failed). */
  async close(): Promise<void> {
    while (this.groupWriting || this.groupQueued) await (this.groupQueued ?? this.groupWriting)!.catch(() => {});
    await this.db.close();
  }
}

/**
 * LevelDB's write buffer (its memtable, and the `.log` behind it): 16 MiB, not LevelDB's 4. A node
 * writes ~4 KB per call, half of it under keys spread over the whole key range (a call's snapshot and
 * payload, its running mark, its mids), so every compaction rewrites much of the next level: the
 * provider's compaction thread took 0.04, 0.10, 0.125, 0.175, 0.255 ms a call in bench/calls' five rounds.
 * Four times fewer, larger level-0 files: 0.02–0.095 ms in the first three rounds, under 0.02 in the last
 * two (same bench, two runs); 0.074–0.075 against 0.082–0.103 ms a call at steady state (127k calls of the
 * provider's recorded writes replayed into a bare LevelDB). The price: two buffers in memory (the one
 * filling and the one being written out), each 16 MiB, or up to ~32 MiB when one large write tips it
 * over (a hub's envelope of up to 16 MiB); and a log as large to replay and check when the store opens
 * (~170 ms for 16 MiB). The hub's store opens here too.
 */
const WRITE_BUFFER_BYTES = 16 * 1024 * 1024;

/**
 * Opens a LevelDB directory with the msgpackr codec; a second process gets StoreLockedError, a damaged
 * write-ahead log StoreDamagedError (checked first: LevelDB's own open would drop the damaged record).
 */
export async function openLevel(dir: string, dataDir: string, create = true): Promise<Level<string, unknown>> {
  const damage = await checkWriteAheadLog(dir);
  if (damage) throw new StoreDamagedError(dataDir, relative(dataDir, join(dir, damage.file)), damage);
  const db = new Level<string, unknown>(dir, { valueEncoding: msgpack, createIfMissing: create, writeBufferSize: WRITE_BUFFER_BYTES });
  try {
    await db.open();
  } catch (err) {
    if ((err as { cause?: { code?: string } }).cause?.code === 'LEVEL_LOCKED') throw new StoreLockedError(dataDir);
    throw new Error(openFailure(dir, err as Error & { cause?: Error }), { cause: err });
  }
  return db;
}

/** One line naming the file LevelDB could not open with and what to do: CURRENT names the MANIFEST in use. */
function openFailure(dir: string, err: Error & { cause?: Error }): string {
  const why = (err.cause?.message ?? err.message).replace(/\s+/g, ' ');
  const restore = `restore ${dir} from a backup (moving it aside starts an empty store: the journal, tasks and peers' KELs in it are lost)`;
  let named = '';
  try {
    named = readFileSync(join(dir, 'CURRENT'), 'utf8');
  } catch {
    return `cannot open the store ${dir}: ${why}; ${restore}`;
  }
  const manifests = readdirSync(dir).filter((f) => /^MANIFEST-\d+$/.test(f));
  if (!/^MANIFEST-\d+\n$/.test(named) || !manifests.includes(named.trim())) {
    const fix = manifests.length === 1 ? `it should hold the name ${manifests[0]} and a newline; write that, or ` : '';
    return `${join(dir, 'CURRENT')} is damaged (${why}): ${fix}${restore}`;
  }
  return `${join(dir, named.trim())} is damaged (${why}): ${restore}`;
}

export const deadlineKey = (deadline: number, actor: string) => `${timeKey(deadline)}!${actor}`;

export function checkActorId(id: string): void {
  if (id.length === 0 || id.includes('!')) throw new Error(`actor id "${id}" must be non-empty and contain no "!"`);
}

// The chain's checks that read the store (store/chain.ts holds the rest and imports nothing of the store's).

/**
 * Links without the meta record of where the chain starts (a journal that had none looks like one written
 * before the chain existed, and would be checked for continuity only): damage at the first link.
 */
export async function lostChainStart(store: Store): Promise<Damage | null> {
  if (store.chainStart !== undefined) return null;
  for await (const [key, v] of store.chain.iterator({ limit: 1 })) {
    return {
      seq: (v as { from: number }).from,
      problem: `the record of where the hash chain starts is lost (a link ends at #${Number(key)})`,
    };
  }
  return null;
}

/** A check of the whole journal, from seq 1 (`anet replay --verify`). */
export async function fullCheck(store: Store): Promise<ChainCheck> {
  const check = new ChainCheck({ to: 0, h: ZERO_HASH }, store.chainStart, store.links(0));
  const lost = await lostChainStart(store);
  if (lost) check.damage = lost;
  return check;
}
