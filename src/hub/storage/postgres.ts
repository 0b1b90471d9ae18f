// The hub's PostgreSQL store (issue 19): one database shared by any number of hub replicas. Nothing here
// relies on an in-process queue or lock for correctness; two hub processes on one database get exactly the
// guarantees one gets:
// - a registration spends its invite with `used_by is null` in the UPDATE's condition (row lock, one winner);
// - a request nonce is a primary key (INSERT … ON CONFLICT DO NOTHING: one insert wins);
// - a ledger transaction locks every row it reads and inserts every row it read as absent, and is run
//   again whole when it loses a race (23505, or a deadlock 40P01): an op key is a primary key, so two
//   replicas racing on one op cannot both commit (see LockingReads); ops that wait go together in one such
//   transaction, one after another (see PgLedger and ledger-batch.ts);
// - a mailbox write holds the row locks of its counters (see `keepMail`).
// Commits are synchronous (synchronous_commit on, whatever the server's default): an acknowledged write
// survives a crash of the database server.
import postgres, { type ISql, type PendingQuery, type ReservedSql, type Row, type RowList, type Sql, type TransactionSql } from 'postgres';
import { agentFromRow, BACKFILL_KEY, SEARCH_SETTINGS, searchAgents, searchVector, type AgentRow } from '../search/postgres.js';
import { runBatch, type BatchReads, type BatchWrites, type Outcome, type TransactFn } from './ledger-batch.js';
import { migrate, SchemaTooNewError } from './migrations.js';
import { PgBlobs } from './postgres-blobs.js';
import {
  WrongHubError,
  type AccountRecord,
  type AgentRecord,
  type AgentStore,
  type HoldRecord,
  type HoldState,
  type HubStorage,
  type Invite,
  type LedgerPlan,
  type LedgerReads,
  type LedgerStore,
  type LedgerTransactionCounts,
  type LedgerWrites,
  type RequestNonce,
  type Mail,
  type MailboxLimits,
  type MailboxStore,
  type NonceStore,
  type OpRecord,
  type SearchPage,
  type SearchQuery,
} from './types.js';

export interface PostgresStorageOptions {
  now?: () => number;
  /** Connections in this process's main pool (default 20); the ledger's transactions have their own (LEDGER_CONNECTIONS). */
  max?: number;
  /** Where a long start-up task says how far it got (default: stderr, and only for large tables). */
  progress?: (line: string) => void;
}

/** Opens (and migrates) the hub store at `url`, a `postgres://` URL. */
export async function openPostgresStorage(url: string, opts: PostgresStorageOptions = {}): Promise<HubStorage> {
  const where = withoutPassword(url);
  let sql = connect(url, opts, {});
  let durable: Record<string, string> = {};
  try {
    await migrate(sql, where, opts.now);
    await fillSearchWords(sql, opts.progress);
    // An acknowledged payment or kept envelope must survive a crash of the database server: a server
    // set to synchronous_commit=off gets `on` for this hub's sessions (any stronger setting is kept).
    const [row] = await sql<{ synchronous_commit: string }[]>`show synchronous_commit`;
    if (row?.synchronous_commit === 'off') {
      await sql.end({ timeout: 5 });
      durable = { synchronous_commit: 'on' };
      sql = connect(url, opts, durable);
    }
  } catch (err) {
    await sql.end({ timeout: 5 }).catch(() => {});
    throw opening(err, where);
  }
  // Directory searches on sessions of their own, started with the settings they are planned under: no
  // transaction round trips to set them at each search (a few tenths of a millisecond, more under load).
  const search = connect(url, { max: SEARCH_CONNECTIONS }, { ...SEARCH_SETTINGS });
  // Ledger transactions likewise, started with the plans they need (LEDGER_SETTINGS): no settings statement
  // in each transaction's first batch.
  const ledger = connect(url, { max: LEDGER_CONNECTIONS }, { ...durable, ...LEDGER_SETTINGS });
  return {
    kind: 'postgres',
    where,
    agents: new PgAgents(sql, search),
    nonces: new PgNonces(sql),
    ledger: new PgLedger(sql, ledger),
    mailbox: new PgMailbox(sql),
    blobs: new PgBlobs(sql),
    bind: (hubAid) => bind(sql, where, hubAid),
    close: async () => {
      await Promise.all([sql.end({ timeout: 5 }), search.end({ timeout: 5 }), ledger.end({ timeout: 5 })]);
    },
  };
}

/** Connections for directory searches, beside the main pool, per replica. */
const SEARCH_CONNECTIONS = 4;

/**
 * Connections for ledger transactions, beside the main pool, per replica, so mail, blobs and the directory
 * never wait behind payments. LEDGER_BATCHES_IN_FLIGHT of them carry the ledger's transactions; the rest
 * serve the ops of a batch the database failed, run one by one at once. 20 keep two replicas (2 × 44
 * connections) within PostgreSQL's default max_connections of 100.
 */
const LEDGER_CONNECTIONS = 20;

function connect(url: string, opts: PostgresStorageOptions, settings: Record<string, string>): Sql {
  return postgres(url, {
    max: opts.max ?? 20,
    onnotice: () => {},
    // int8 and numeric come back as strings (the client's default): amounts and counters never pass through a float.
    connection: { application_name: 'anet-hub', ...settings },
  });
}

/** The URL without its password, for messages. */
export function withoutPassword(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString().replace('%2A%2A%2A', '***');
  } catch {
    return 'the PostgreSQL database (its URL does not parse)';
  }
}

/** A failure to reach or migrate the database, as one line naming it. */
function opening(err: unknown, where: string): Error {
  if (err instanceof SchemaTooNewError) return err;
  const e = err as { code?: string; message?: string };
  return new Error(
    `cannot open the hub database at ${where}: ${e.code ? `${e.code} ` : ''}${e.message ?? String(err)} (check the URL, that PostgreSQL runs and that the user may create tables)`,
    { cause: err },
  );
}

async function bind(sql: Sql, where: string, hubAid: string): Promise<void> {
  await sql`insert into meta (key, value) values ('hub_aid', ${hubAid}) on conflict (key) do nothing`;
  const [row] = await sql<{ value: string }[]>`select value from meta where key = 'hub_aid'`;
  if (row && row.value !== hubAid) throw new WrongHubError(where, row.value, hubAid);
}

// ---- Bytes and numbers ----

/** A Buffer over the same bytes (the client writes Buffers to bytea). */
const buf = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
/** A plain Uint8Array of its own, as the other backend gives (never a view of a pooled buffer). */
const u8 = (b: Buffer) => new Uint8Array(b);
/** int8 columns come back as strings; times (ms) and seqs fit a double exactly. */
const num = (v: string | number) => Number(v);
const numOrNull = (v: string | number | null) => (v === null ? null : Number(v));

// ---- The directory ----

/** Positive isRecipient answers kept in memory: a key set is never unpublished. */
const RECIPIENT_CACHE = 100_000;

class PgAgents implements AgentStore {
  private readonly recipients = new Set<string>();
  private readonly reads: AgentReads;

  constructor(
    private readonly sql: Sql,
    private readonly searchSql: Sql,
  ) {
    this.reads = new AgentReads(sql);
  }

  get(aid: string): Promise<AgentRecord | undefined> {
    return this.reads.get(aid);
  }

  put(rec: AgentRecord): Promise<void> {
    return this.write(this.sql, rec);
  }

  /** The row locked while `fn` decides; an absent row is inserted, so a racer that made it meanwhile runs again. */
  update(aid: string, fn: (current: AgentRecord | undefined) => AgentRecord | null): Promise<AgentRecord | null> {
    return retrying(() =>
      this.sql.begin(async (tx) => {
        const [row] = await tx<AgentRow[]>`
          select aid, name, kel, card, seq, digest, keys, updated_at from agents where aid = ${aid} for update`;
        const next = fn(row ? agentFromRow(row) : undefined);
        if (next) await this.write(tx, next, row !== undefined);
        return next;
      }),
    );
  }

  async admit(rec: AgentRecord, inviteKey: string, now: number): Promise<'ok' | 'unknown' | 'used' | 'exists'> {
    // Run again when its insert lost to a racer's (23505): the AID is then found, and the invite unspent.
    return retrying(() =>
      this.sql.begin(async (tx) => {
        // Registered meanwhile (another first registration of the same AID won): never overwritten here.
        const [exists] = await tx`select aid from agents where aid = ${rec.aid} for update`;
        if (exists) return 'exists';
        // Of registrations racing on one invite, the first UPDATE takes the row lock; the others wait, then
        // see used_by set and update nothing.
        const spent = await tx`
        update invites set used_by = ${rec.aid}, used_at = ${now} where key = ${inviteKey} and used_by is null returning key`;
        if (spent.length === 0) {
          const [known] = await tx`select key from invites where key = ${inviteKey}`;
          return known ? 'used' : 'unknown';
        }
        // A plain insert: a racer that inserted the AID since fails this on its key, and nothing is spent.
        await this.write(tx, rec, false);
        return 'ok' as const;
      }),
    );
  }

  async invite(key: string, invite: Invite): Promise<void> {
    await this.sql`
      insert into invites (key, created_at, used_by, used_at)
      values (${key}, ${invite.createdAt}, ${invite.usedBy}, ${invite.usedAt})
      on conflict (key) do update set created_at = excluded.created_at, used_by = excluded.used_by, used_at = excluded.used_at`;
  }

  /** Ranked by src/hub/search (the same rules as the embedded index), over the `search` column. */
  search(query: SearchQuery): Promise<SearchPage> {
    return searchAgents(this.searchSql, query, true);
  }

  async isRecipient(aid: string): Promise<boolean> {
    if (this.recipients.has(aid)) return true;
    const [row] = await this.sql<{ yes: boolean }[]>`select keys is not null as yes from agents where aid = ${aid}`;
    if (!row?.yes) return false;
    if (this.recipients.size >= RECIPIENT_CACHE) this.recipients.clear();
    this.recipients.add(aid);
    return true;
  }

  /** An upsert, or with `existing` false a plain insert (which fails 23505 if a racer inserted first). */
  private async write(sql: Sql | TransactionSql, rec: AgentRecord, existing = true): Promise<void> {
    if (!existing) {
      await sql`
        insert into agents (aid, name, kel, card, seq, digest, keys, updated_at, search)
        values (${rec.aid}, ${rec.name}, ${buf(rec.kel)}, ${rec.card}, ${rec.seq}, ${rec.digest},
                ${rec.keys ? buf(rec.keys) : null}, ${rec.updatedAt}, ${searchVector(sql as Sql, rec)})`;
      return;
    }
    await sql`
      insert into agents (aid, name, kel, card, seq, digest, keys, updated_at, search)
      values (${rec.aid}, ${rec.name}, ${buf(rec.kel)}, ${rec.card}, ${rec.seq}, ${rec.digest},
              ${rec.keys ? buf(rec.keys) : null}, ${rec.updatedAt}, ${searchVector(sql as Sql, rec)})
      on conflict (aid) do update set
        name = excluded.name, kel = excluded.kel, card = excluded.card, seq = excluded.seq, digest = excluded.digest,
        keys = excluded.keys, updated_at = excluded.updated_at, search = excluded.search`;
  }
}

/** Agents read a batch while filling the directory's vocabulary: a short transaction each (~0.2 s). */
const FILL_BATCH = 2000;
/** Fewer agents than this fill the vocabulary in a few seconds at most, without a word on stderr. */
const FILL_QUIET_BELOW = 20_000;

/**
 * Fills `search_words` from the agents stored before migration 3, in batches in AID order; the `meta` row
 * holds the last AID done (replicas starting together share it: each batch locks it), and goes when all
 * are done, which tells searches the vocabulary is complete. Writes meanwhile add their words by trigger.
 */
async function fillSearchWords(sql: Sql, progress?: (line: string) => void): Promise<void> {
  const [{ n } = { n: '0' }] = await sql<{ n: string }[]>`
    select count(*) as n from agents where exists (select 1 from meta where key = ${BACKFILL_KEY})`;
  const say = progress ?? (Number(n) >= FILL_QUIET_BELOW ? (line: string) => void process.stderr.write(`${line}\n`) : () => {});
  let done = 0;
  let told = 0;
  for (;;) {
    const read = await fillBatch(sql);
    if (read === null) break;
    done += read;
    if (done - told >= Number(n) / 10) {
      told = done;
      say(`directory vocabulary: ${done.toLocaleString('en')} of ${Number(n).toLocaleString('en')} agents read`);
    }
  }
  if (done > 0) say(`directory vocabulary complete (${done.toLocaleString('en')} agents read)`);
  await analyzeAgents(sql, done > 0);
}

/**
 * Searches choose how to read each part of a query from the statistics of `agents` (search/postgres.ts):
 * a table never analyzed (filled since the last autovacuum round), or just migrated to 10,000 lexemes of
 * statistics, is analyzed now (0.3 s at 10k agents, 3 s at 100k).
 */
async function analyzeAgents(sql: Sql, migrated: boolean): Promise<void> {
  const [row] = await sql<{ analyzed: boolean }[]>`
    select exists (select 1 from pg_stats where schemaname = current_schema() and tablename = 'agents' and attname = 'search')
      or not exists (select 1 from agents where search is not null) as analyzed`;
  if (migrated || !row?.analyzed) await sql`analyze agents`;
}

/** One batch: the agents read, or null when the vocabulary was already complete. */
function fillBatch(sql: Sql): Promise<number | null> {
  return sql.begin(async (tx) => {
    const [row] = await tx<{ value: string }[]>`select value from meta where key = ${BACKFILL_KEY} for update`;
    if (!row) return null;
    // Words in code-unit order, as the trigger inserts them: no two writers wait on each other in a cycle.
    const [last] = await tx<{ aid: string | null; n: string }[]>`
      with batch as (
        select aid, search from agents where aid > ${row.value} order by aid limit ${FILL_BATCH}
      ), added as (
        insert into search_words (word)
          select distinct w collate "C" from batch, unnest(tsvector_to_array(batch.search)) w
          where left(w, 1) not in ('^', '+', '~')
          order by 1
          on conflict do nothing
      )
      select max(aid) as aid, count(*) as n from batch`;
    if (last?.aid == null) await tx`delete from meta where key = ${BACKFILL_KEY}`;
    else await tx`update meta set value = ${last.aid} where key = ${BACKFILL_KEY}`;
    return Number(last?.n ?? 0);
  }) as Promise<number | null>;
}

/** Agent reads in one statement at most this many at once; more wait for one to end. */
const AGENT_READS_IN_FLIGHT = 2;
const AGENT_READ_BATCH = 500;

/**
 * Reads of agents by AID (every signed request reads its signer's KEL; a hold also its payer's), several
 * in one statement: a read asked while AGENT_READS_IN_FLIGHT statements are under way waits for one to end
 * and goes with all that waited (at 32 ledger ops at once: one statement for many, each statement costing
 * both sides far more than its rows). Alone, a read goes at once. A read asked after a write ended is sent
 * after it, so it sees it.
 */
class AgentReads {
  private readonly waiting: { aid: string; resolve: (rec: AgentRecord | undefined) => void; reject: (err: unknown) => void }[] = [];
  private inFlight = 0;

  constructor(private readonly sql: Sql) {}

  get(aid: string): Promise<AgentRecord | undefined> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ aid, resolve, reject });
      this.next();
    });
  }

  private next(): void {
    if (this.inFlight >= AGENT_READS_IN_FLIGHT || this.waiting.length === 0) return;
    this.inFlight++;
    const batch = this.waiting.splice(0, AGENT_READ_BATCH);
    void this.read(batch).finally(() => {
      this.inFlight--;
      this.next();
    });
  }

  private async read(batch: AgentReads['waiting']): Promise<void> {
    try {
      const aids = [...new Set(batch.map((w) => w.aid))];
      const rows = await this.sql<AgentRow[]>`
        select aid, name, kel, card, seq, digest, keys, updated_at from agents where aid = any(${aids}::text[])`;
      const found = new Map(rows.map((r) => [r.aid, r]));
      // A record of its own for each reader, as a read of one row gave.
      for (const w of batch) {
        const row = found.get(w.aid);
        w.resolve(row ? agentFromRow(row) : undefined);
      }
    } catch (err) {
      if (batch.length === 1) return batch[0]!.reject(err);
      // One reader's AID that the statement cannot take (a NUL byte, say) fails that reader alone.
      await Promise.all(batch.map((w) => this.read([w])));
    }
  }
}

// ---- Request nonces ----

class PgNonces implements NonceStore {
  constructor(private readonly sql: Sql) {}

  async claim(aid: string, nonce: string, time: number): Promise<boolean> {
    const r = await this.sql`insert into nonces (aid, nonce, time) values (${aid}, ${nonce}, ${time}) on conflict do nothing`;
    return r.count === 1;
  }

  async prune(before: number): Promise<void> {
    await this.sql`delete from nonces where time < ${before}`;
  }
}

// ---- Retrying transactions that lost a race ----

/** An error the server answered (a SQLSTATE), not a connection lost or refused. */
const isDatabaseError = (err: unknown): boolean => /^[0-9A-Z]{5}$/.test(String((err as { code?: unknown }).code ?? ''));

/** serialization_failure, deadlock_detected, unique_violation: the transaction lost a race; run it again. */
const RETRYABLE = new Set(['40001', '40P01', '23505']);
const MAX_ATTEMPTS = 20;

async function retrying<T>(run: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (!code || !RETRYABLE.has(code) || attempt >= MAX_ATTEMPTS) throw err;
      // Jittered and growing, so racers spread out instead of colliding again in step.
      const ms = Math.random() * Math.min(2 ** attempt, 50);
      await new Promise((r) => setTimeout(r, ms));
    }
  }
}

// ---- The ledger ----

interface AccountRow {
  balance: string;
  held: string;
  seq: string;
  head: string | null;
}

interface HoldRow {
  from_aid: string | null;
  to_aid: string;
  amount: string;
  state: string;
  at: string;
  expires: string | null;
  tx: string;
}

const MINTED = 'ledger_minted';

function accountFromRow(row: AccountRow): AccountRecord {
  const rec: AccountRecord = { balance: row.balance, held: row.held, seq: num(row.seq) };
  if (row.head !== null) rec.head = row.head;
  return rec;
}

function holdFromRow(row: HoldRow): HoldRecord {
  return {
    from: row.from_aid,
    to: row.to_aid,
    amount: row.amount,
    state: row.state as HoldState,
    at: num(row.at),
    expires: numOrNull(row.expires),
    tx: row.tx,
  };
}

/**
 * Reads through one READ COMMITTED transaction, each locking what it read (FOR UPDATE) until the commit:
 * a row read is the newest committed one and no other transaction changes it before this one ends. A row
 * read as absent cannot be locked, so it is remembered, and written back with a plain INSERT: had another
 * transaction created it meanwhile, the insert fails on its key (23505) and the whole transaction runs
 * again. That makes every ledger transaction serialisable against every other (two-phase row locks plus
 * unique keys), on any number of replicas, without SERIALIZABLE's predicate locks: at 32 transactions at
 * once on distinct payers those locked whole small tables and index pages, and most transactions failed
 * as pivots again and again (measured: under 200 ops/s, and some still failing after 20 attempts).
 *
 * Round trips: a read a round trip made about ten an op, each a socket write on both sides (most of the
 * hub's CPU). So the transaction runs on a connection of its own, BEGIN goes with its first reads and
 * COMMIT with its writes, each group one batch (one Sync: the server answers it at once); what the ledger
 * declared (`prefetch`) is that first batch. A row read once is answered again from memory: it stays
 * locked, so a second read could only give the same row; an absent one stays absent to this transaction,
 * and its insert still fails if a racer made it meanwhile. A batch of ops (ledger-batch.ts) reads through
 * one LockingReads: its plans in one prefetch, its writes and COMMIT in one round trip.
 */
class LockingReads implements BatchReads {
  /** Per AID read: its account, undefined when there was none (the write is then an insert). */
  readonly accounts = new Map<string, AccountRecord | undefined>();
  /** Per hold nonce read: the hold, undefined when there was none. */
  readonly holds = new Map<string, HoldRecord | undefined>();
  private readonly ops = new Map<string, OpRecord | undefined>();
  /** Per payer whose due holds were read: at which time, and their nonces. */
  private readonly due = new Map<string, { at: number; nonces: string[] }>();
  private state: 'idle' | 'open' | 'ended' = 'idle';
  /** The request nonces this transaction inserted: taken once it commits. */
  private readonly claims: RequestNonce[] = [];

  constructor(private readonly sql: ReservedSql) {}

  async prefetch(plan: LedgerPlan): Promise<boolean> {
    const [claimed] = await this.prefetchAll([plan]);
    return claimed!;
  }

  /**
   * Every plan's reads in one statement (a batch's: see ledger-batch.ts), as one plan of all their holds,
   * accounts and claims, read at the latest of their times (dueOf answers an earlier time from it). Per
   * plan, whether its claim was taken: of two plans claiming one nonce, the first.
   */
  async prefetchAll(plans: LedgerPlan[]): Promise<boolean[]> {
    // A batch none of whose ops declared a plan reads as it goes.
    if (plans.length === 0) return [];
    const plan = joined(plans);
    const holds = [...new Set(plan.holds ?? [])].sort();
    const claims = plans.flatMap((p) => (p.claim ? [p.claim] : []));
    // The op records in a statement of their own, after the locks: its snapshot then holds the record of an
    // op whose transaction held a lock this one waited for (a settlement holds its hold's row), which
    // the prefetch's snapshot, taken before it waited, does not.
    const ops = [...new Set(plans.flatMap((p) => (p.op === undefined ? [] : [p.op])))];
    const [rows, opRows] = (await this.send([
      prefetching(this.sql, plan, holds, claims),
      this.sql`select key, digest, answer from ops where key = any(${ops}::text[])`,
    ])) as unknown as [PrefetchRow[], (OpRow & { key: string })[]];
    const inserted = new Set(rows.filter((r) => r.kind === 'c').map((r) => claimKey(r.to_aid!, r.key)));
    const claimed = plans.map((p) => {
      if (!p.claim) return true;
      if (!inserted.delete(claimKey(p.claim.aid, p.claim.nonce))) return false;
      this.claims.push(p.claim);
      return true;
    });
    this.cache(plan, holds, rows);
    for (const key of ops) {
      const row = opRows.find((r) => r.key === key);
      this.ops.set(key, row ? opFromRow(row) : undefined);
    }
    return claimed;
  }

  private cache(plan: LedgerPlan, holds: string[], rows: PrefetchRow[]): void {
    const due: PrefetchRow[] = [];
    for (const r of rows) {
      if (r.kind === 'a') this.accounts.set(r.key, accountFromRow(r));
      else if (r.kind !== 'c') this.holds.set(r.key, holdFromRow(r));
      if (r.kind === 'd') due.push(r);
    }
    for (const n of holds) if (!this.holds.has(n)) this.holds.set(n, undefined);
    // The accounts the statement read (the plan's and the parties of the holds it read open) and their due holds.
    for (const aid of plannedAids(plan, holds, this.holds)) {
      if (!this.accounts.has(aid)) this.accounts.set(aid, undefined);
      this.due.set(aid, { at: plan.at, nonces: due.filter((r) => r.from_aid === aid).map((r) => r.key) });
    }
  }

  async account(aid: string): Promise<AccountRecord | undefined> {
    if (!this.accounts.has(aid)) {
      const [row] = await this.query<AccountRow>(this.sql`select balance, held, seq, head from accounts where aid = ${aid} for update`);
      this.accounts.set(aid, row ? accountFromRow(row) : undefined);
    }
    return this.accounts.get(aid);
  }

  async entry(aid: string, seq: number): Promise<Uint8Array | undefined> {
    // History is append-only: an entry never changes once written, so it needs no lock.
    const [row] = await this.query<{ bytes: Buffer }>(this.sql`select bytes from history where aid = ${aid} and seq = ${seq}`);
    return row ? u8(row.bytes) : undefined;
  }

  async hold(nonce: string): Promise<HoldRecord | undefined> {
    if (!this.holds.has(nonce)) {
      const [row] = await this.query<HoldRow>(this.sql`
        select from_aid, to_aid, amount, state, at, expires, tx from holds where nonce = ${nonce} for update`);
      this.holds.set(nonce, row ? holdFromRow(row) : undefined);
    }
    return this.holds.get(nonce);
  }

  async op(key: string): Promise<OpRecord | undefined> {
    // An op record never changes; one written meanwhile makes this transaction's insert of it fail (23505).
    if (!this.ops.has(key)) {
      const [row] = await this.query<OpRow>(this.sql`select digest, answer from ops where key = ${key}`);
      this.ops.set(key, row ? opFromRow(row) : undefined);
    }
    return this.ops.get(key);
  }

  async minted(): Promise<string> {
    // The row is there from the first migration, so mints take turns on its lock.
    const [row] = await this.query<{ value: string }>(this.sql`select value from meta where key = ${MINTED} for update`);
    return row?.value ?? '0';
  }

  async dueOf(payer: string, now: number): Promise<string[]> {
    const known = this.due.get(payer);
    // Read at a later time (a batch reads at the latest of its ops' times), and locked: those due by `now`.
    if (known && known.at >= now) return known.nonces.filter((n) => (this.holds.get(n)?.expires ?? Number.POSITIVE_INFINITY) <= now);
    // The payer's account first: every transaction that opens or ends a hold of this payer changes its
    // `held`, so holding that lock keeps this list true until the commit.
    await this.account(payer);
    const rows = await this.query<NamedHoldRow>(this.sql`
      select nonce, from_aid, to_aid, amount, state, at, expires, tx from holds
      where from_aid = ${payer} and state = 'held' and expires <= ${now} order by expires, nonce for update`);
    for (const r of rows) this.holds.set(r.nonce, holdFromRow(r));
    const nonces = rows.map((r) => r.nonce);
    this.due.set(payer, { at: now, nonces });
    return nonces;
  }

  /** Commits `writes` (if any) in one round trip with the COMMIT. */
  async commit(writes: BatchWrites | null): Promise<void> {
    if (this.state === 'idle' && !writes) return;
    const results = await this.send(writes ? [writeLedger(this.sql, writes, this), this.sql`commit`] : [this.sql`commit`]);
    this.state = 'ended';
    const done = results[results.length - 1] as { command?: string };
    if (done.command !== 'COMMIT') throw new Error(`the ledger transaction was rolled back (${done.command}) instead of committed`);
    for (const claim of this.claims) claim.taken = true;
  }

  /**
   * Ends a transaction whose function threw: its claim alone is committed (a refused request was taken, as
   * the hub's separate claim was; a transaction that failed answers ROLLBACK to that), else rolled back. A
   * connection that broke is closed on release instead.
   */
  async abandon(): Promise<void> {
    if (this.state !== 'open') return;
    if (this.claims.length > 0) return this.commit(null).catch(() => {});
    await this.rollback();
  }

  /** Ends the transaction writing nothing, its claims neither (a batch the database failed, run again). */
  async rollback(): Promise<void> {
    if (this.state !== 'open') return;
    this.state = 'ended';
    await this.sql`rollback`.catch(() => {});
  }

  private async query<R>(q: PendingQuery<Row[]>): Promise<R[]> {
    const [rows] = await this.send([q]);
    return rows as unknown as R[];
  }

  /** `queries` as one batch, after a BEGIN when they are this transaction's first. */
  private async send(queries: PendingQuery<Row[]>[]): Promise<RowList<Row[]>[]> {
    if (this.state === 'open') return this.sql.batch(queries);
    if (this.state === 'ended') throw new Error('ledger bug: a read after the transaction ended');
    this.state = 'open';
    const [, ...results] = await this.sql.batch([this.sql`begin`, ...queries]);
    return results;
  }
}

/**
 * How the ledger's statements are planned, set when each of its sessions starts (its own pool, which runs
 * nothing else). PostgreSQL would plan them again at every execution (the prefetch: 0.4 ms to plan, 0.1 ms
 * to run), as their generic plan looks dearer to it for arrays of unknown length; their shapes are fixed,
 * so the generic plan is kept. Every statement reads by key, so it may never scan a table: a generic plan
 * made while a table was small joined the writes' rows to a whole scan of `holds` and `accounts`
 * (measured: a quarter of the server's CPU an op, growing with the ledger).
 */
const LEDGER_SETTINGS = {
  plan_cache_mode: 'force_generic_plan',
  enable_seqscan: 'off',
  enable_hashjoin: 'off',
  enable_mergejoin: 'off',
} as const;

type NamedHoldRow = HoldRow & { nonce: string };
type OpRow = { digest: string; answer: string | null };

const opFromRow = (row: OpRow): OpRecord => ({ digest: row.digest, answer: row.answer === null ? undefined : JSON.parse(row.answer) });

/** One row of a prefetch: the claim ('c'), a named hold ('h'), an account ('a') or a due hold ('d'). */
type PrefetchRow = NamedHoldRow & AccountRow & { kind: 'c' | 'h' | 'a' | 'd'; key: string };

/**
 * A plan's reads as ONE statement (each statement costs both sides more than its rows do), taking its locks
 * in the order every ledger transaction does: the named holds (by nonce), then the accounts (by AID: of the
 * plan and the open holds' parties), then those accounts' due holds; each CTE is materialised, and each
 * part of the UNION ALL runs after the one before. One snapshot serves the three, so it reads locked rows
 * only: a row another transaction changed while this one waited for its lock is read as committed (READ
 * COMMITTED re-reads a locked row), and a hold inserted meanwhile is not due (a hold is due 24 h after it
 * is made); a row read without a lock (the op record) is read after it (see prefetch). Every part always
 * runs, so it is one prepared statement whatever the plan holds.
 */
function prefetching(sql: ReservedSql, plan: LedgerPlan, holds: string[], claims: RequestNonce[]): PendingQuery<Row[]> {
  const aids = [...new Set(plan.accounts ?? [])];
  // In key order: two batches claiming the same nonces take their locks in the same order.
  const unique = [...new Map(claims.map((c) => [claimKey(c.aid, c.nonce), c])).entries()]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([, c]) => c);
  // The claims first, as the hub claims a nonce before anything else: a copy of the request in another
  // transaction (on any replica) waits here for that one to end, then finds the nonce (no 'c' row) or
  // inserts it. A data-modifying CTE runs to its end when its arm of the UNION ALL is read: the first, which
  // names the columns.
  return sql`
    with
    c as (insert into nonces (aid, nonce, time)
      select * from unnest(${unique.map((c) => c.aid)}::text[], ${unique.map((c) => c.nonce)}::text[], ${unique.map((c) => c.time)}::int8[])
      on conflict do nothing returning aid, nonce),
    h as materialized (
      select nonce, from_aid, to_aid, amount, state, at, expires, tx from holds where nonce = any(${holds}::text[])
      order by nonce for update),
    a as materialized (
      select aid, balance, held, seq, head from accounts
      where aid in (
        select unnest(${aids}::text[]) collate "C"
        union select from_aid from h where state = 'held' and ${plan.parties !== undefined}::bool
        union select to_aid from h where state = 'held' and ${plan.parties === 'both'}::bool)
      order by aid for update),
    d as materialized (
      select nonce, from_aid, to_aid, amount, state, at, expires, tx from holds
      where from_aid in (select aid collate "default" from a) and state = 'held' and expires <= ${plan.at}
      order by expires, nonce for update)
    select 'c' as kind, nonce as key, null::text as from_aid, aid as to_aid, null::text as amount, null::text as state,
      null::int8 as at, null::int8 as expires, null::text as tx, null::text as balance, null::text as held, null::int8 as seq, null::text as head
      from c
    union all select 'h', nonce, from_aid, to_aid, amount::text, state, at, expires, tx, null, null, null, null from h
    union all select 'a', aid, null, null, null, null, null, null, null, balance::text, held::text, seq, head from a
    union all select 'd', nonce, from_aid, to_aid, amount::text, state, at, expires, tx, null, null, null, null from d`;
}

const claimKey = (aid: string, nonce: string) => `${aid}\n${nonce}`;

/**
 * The plans of a batch as one: all their holds and accounts, the parties the widest of them asks for (a
 * few more rows locked, never fewer), at the latest of their times.
 */
function joined(plans: LedgerPlan[]): LedgerPlan {
  if (plans.length === 1) return plans[0]!;
  const parties = plans.some((p) => p.parties === 'both') ? 'both' : plans.some((p) => p.parties === 'payer') ? 'payer' : undefined;
  const plan: LedgerPlan = {
    at: Math.max(...plans.map((p) => p.at)),
    holds: plans.flatMap((p) => p.holds ?? []),
    accounts: plans.flatMap((p) => p.accounts ?? []),
  };
  if (parties) plan.parties = parties;
  return plan;
}

/** The AIDs a plan names: its accounts and, as asked, the parties of those of its holds that are open. */
function plannedAids(plan: LedgerPlan, holds: string[], read: Map<string, HoldRecord | undefined>): Set<string> {
  const aids = new Set(plan.accounts ?? []);
  for (const nonce of holds) {
    const h = read.get(nonce);
    if (h?.state !== 'held' || !plan.parties) continue;
    aids.add(h.from!);
    if (plan.parties === 'both') aids.add(h.to);
  }
  return aids;
}

/** How a row is written: updated (read as present), inserted (read as absent), or upserted (never read). */
type WriteKind = 'update' | 'insert' | 'upsert';

function writeKind(read: Map<string, unknown>, key: string): WriteKind {
  if (!read.has(key)) return 'upsert';
  return read.get(key) === undefined ? 'insert' : 'update';
}

type Cell = string | number | null;

/** One column of rows, as an array for unnest. */
const col = (rows: Record<string, Cell>[], name: string): Cell[] => rows.map((r) => r[name] ?? null);

/**
 * Every write of one ledger transaction as ONE statement (each table's rows as column arrays, unnested), so
 * it is one round trip: a row read as present is updated, one read as absent inserted (failing on its key if
 * another transaction created it meanwhile), one never read upserted.
 */
function writeLedger(tx: ReservedSql, w: BatchWrites, seen: LockingReads): PendingQuery<Row[]> {
  const accounts: Record<WriteKind, Record<string, Cell>[]> = { update: [], insert: [], upsert: [] };
  for (const [aid, a] of w.accounts)
    accounts[writeKind(seen.accounts, aid)].push({ aid, balance: a.balance, held: a.held, seq: a.seq, head: a.head ?? null });
  const holds: Record<WriteKind, Record<string, Cell>[]> = { update: [], insert: [], upsert: [] };
  for (const [nonce, h] of w.holds)
    holds[writeKind(seen.holds, nonce)].push({
      nonce,
      from_aid: h.from,
      to_aid: h.to,
      amount: h.amount,
      state: h.state,
      at: h.at,
      expires: h.expires,
      tx: h.tx,
    });
  const acct = (kind: WriteKind) => {
    const r = accounts[kind];
    return tx`unnest(${col(r, 'aid')}::text[], ${col(r, 'balance')}::numeric[], ${col(r, 'held')}::numeric[], ${col(r, 'seq')}::int8[],
      ${col(r, 'head')}::text[]) as v(aid, balance, held, seq, head)`;
  };
  const hold = (kind: WriteKind) => {
    const r = holds[kind];
    return tx`unnest(${col(r, 'nonce')}::text[], ${col(r, 'from_aid')}::text[], ${col(r, 'to_aid')}::text[], ${col(r, 'amount')}::numeric[],
      ${col(r, 'state')}::text[], ${col(r, 'at')}::int8[], ${col(r, 'expires')}::int8[], ${col(r, 'tx')}::text[])
      as v(nonce, from_aid, to_aid, amount, state, at, expires, tx)`;
  };
  const op = w.ops;
  // Only the parts that write something: each part costs the server its table and indexes opened even when
  // it writes nothing. The statement's text follows which parts there are: a few shapes, each prepared once.
  const parts = [
    accounts.update.length > 0 &&
      tx`account_updates as (
      update accounts a set balance = v.balance, held = v.held, seq = v.seq, head = v.head from ${acct('update')} where a.aid = v.aid),`,
    accounts.insert.length > 0 &&
      tx`account_inserts as (
      insert into accounts (aid, balance, held, seq, head) select * from ${acct('insert')}),`,
    accounts.upsert.length > 0 &&
      tx`account_upserts as (
      insert into accounts (aid, balance, held, seq, head) select * from ${acct('upsert')}
      on conflict (aid) do update set balance = excluded.balance, held = excluded.held, seq = excluded.seq, head = excluded.head),`,
    w.entries.length > 0 &&
      tx`entries as (
      insert into history (aid, seq, bytes)
      select aid, seq, decode(bytes, 'hex')
      from unnest(${w.entries.map((e) => e.aid)}::text[], ${w.entries.map((e) => e.seq)}::int8[], ${w.entries.map((e) => buf(e.bytes).toString('hex'))}::text[])
        as v(aid, seq, bytes)),`,
    holds.update.length > 0 &&
      tx`hold_updates as (
      update holds h set from_aid = v.from_aid, to_aid = v.to_aid, amount = v.amount, state = v.state, at = v.at, expires = v.expires, tx = v.tx
      from ${hold('update')} where h.nonce = v.nonce),`,
    holds.insert.length > 0 &&
      tx`hold_inserts as (
      insert into holds (nonce, from_aid, to_aid, amount, state, at, expires, tx) select * from ${hold('insert')}),`,
    holds.upsert.length > 0 &&
      tx`hold_upserts as (
      insert into holds (nonce, from_aid, to_aid, amount, state, at, expires, tx) select * from ${hold('upsert')}
      on conflict (nonce) do update set from_aid = excluded.from_aid, to_aid = excluded.to_aid, amount = excluded.amount,
        state = excluded.state, at = excluded.at, expires = excluded.expires, tx = excluded.tx),`,
    // A plain insert: of two replicas answering one op, the second fails here (23505) and, run again, reads the record.
    op.length > 0 &&
      tx`op as (
      insert into ops (key, digest, answer)
      select * from unnest(${op.map((o) => o.key)}::text[], ${op.map((o) => o.digest)}::text[],
        ${op.map((o) => (o.answer === undefined ? null : JSON.stringify(o.answer)))}::text[])),`,
    w.minted !== null &&
      tx`minted as (
      update meta set value = v.value from unnest(${[w.minted]}::text[]) as v(value) where key = ${MINTED}),`,
  ];
  return tx`with ${parts.map((p) => p || tx``)} done as (select 1) select 1`;
}

/** Rows of a streamed read per round trip. */
const BATCH = 1000;

/**
 * Ledger transactions of this replica under way at once. Ops asked for while they all are wait, and go
 * together as one batch (ledger-batch.ts) when one ends; an op asked for alone goes at once, by itself.
 * Measured (bench/hub, 32 ops at once, 2 cores, with the hub, PostgreSQL and the bench's client on them):
 * one transaction per op, up to 20 at once, 700-860 ops/s; batches, 2 in flight 1,325, 4 in flight
 * 1,114-1,300, 8 in flight 1,067 ops/s. 4 leaves room for a batch waiting on another replica's locks.
 */
const LEDGER_BATCHES_IN_FLIGHT = 4;
/** Ops in one batch at most: its locks are held while each of them runs. */
const LEDGER_BATCH_OPS = 32;

interface WaitingOp {
  fn: TransactFn;
  resolve: (answer: unknown) => void;
  reject: (err: unknown) => void;
}

class PgLedger implements LedgerStore {
  readonly counts: LedgerTransactionCounts = { single: 0, batches: 0, batchedOps: 0, fallbacks: 0 };
  private readonly waiting: WaitingOp[] = [];
  private inFlight = 0;

  /** `sql` for reads outside transactions; `transactions`, sessions started with LEDGER_SETTINGS, for transact. */
  constructor(
    private readonly sql: Sql,
    private readonly transactions: Sql,
  ) {}

  transact<T>(fn: (reads: LedgerReads) => Promise<{ answer: T; writes: LedgerWrites | null }>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.waiting.push({ fn, resolve: resolve as (answer: unknown) => void, reject });
      this.next();
    });
  }

  private next(): void {
    if (this.inFlight >= LEDGER_BATCHES_IN_FLIGHT || this.waiting.length === 0) return;
    this.inFlight++;
    const ops = this.waiting.splice(0, LEDGER_BATCH_OPS);
    const run = ops.length === 1 ? this.alone(ops[0]!) : this.together(ops);
    void run.finally(() => {
      this.inFlight--;
      this.next();
    });
  }

  /** One op in a transaction of its own. */
  private async alone(op: WaitingOp): Promise<void> {
    this.counts.single++;
    try {
      op.resolve(await retrying(() => this.once(op.fn)));
    } catch (err) {
      op.reject(err);
    }
  }

  private async once(fn: TransactFn): Promise<unknown> {
    // A connection of its own, so BEGIN and COMMIT can ride with the reads and writes (see LockingReads).
    const sql = await this.transactions.reserve();
    const reads = new LockingReads(sql);
    try {
      const { answer, writes } = await fn(reads);
      await reads.commit(writes && { ...writes, ops: writes.op ? [writes.op] : [] });
      return answer;
    } catch (err) {
      await reads.abandon();
      throw err;
    } finally {
      sql.release();
    }
  }

  /** Ops in one transaction; when the database fails it in a way no new run cures, each op alone. */
  private async together(ops: WaitingOp[]): Promise<void> {
    let outcomes: Outcome[];
    this.counts.batches++;
    this.counts.batchedOps += ops.length;
    try {
      outcomes = await retrying(() => this.batch(ops.map((op) => op.fn)));
    } catch (err) {
      // A lost connection may have lost the COMMIT's answer, not the COMMIT: running the ops again would
      // answer REPLAYED for claims already taken. Each caller gets the error, as one op of its own would.
      if (!isDatabaseError(err)) {
        for (const op of ops) op.reject(err);
        return;
      }
      this.counts.fallbacks++;
      await Promise.all(ops.map((op) => this.alone(op)));
      return;
    }
    for (const [i, o] of outcomes.entries()) {
      if (o.ok) ops[i]!.resolve(o.answer);
      else ops[i]!.reject(o.error);
    }
  }

  private async batch(fns: TransactFn[]) {
    const sql = await this.transactions.reserve();
    const reads = new LockingReads(sql);
    try {
      const { outcomes, writes, failed } = await runBatch(reads, fns);
      if (failed) throw failed.error;
      await reads.commit(writes);
      return outcomes;
    } catch (err) {
      await reads.rollback();
      throw err;
    } finally {
      sql.release();
    }
  }

  async due(now: number, limit: number): Promise<string[]> {
    const rows = await this.sql<{ nonce: string }[]>`
      select nonce from holds where state = 'held' and expires <= ${now} order by expires, nonce limit ${limit}`;
    return rows.map((r) => r.nonce);
  }

  async recent(aid: string, limit: number): Promise<Uint8Array[]> {
    const rows = await this.sql<{ bytes: Buffer }[]>`
      select bytes from history where aid = ${aid} order by seq desc limit ${limit}`;
    return rows.reverse().map((r) => u8(r.bytes));
  }

  async *accounts(): AsyncIterable<[string, AccountRecord]> {
    for await (const rows of this.snapshot<AccountRow & { aid: string }>(
      (s) => s`
      select aid, balance, held, seq, head from accounts order by aid`,
    ))
      for (const row of rows) yield [row.aid, accountFromRow(row)];
  }

  async *history(): AsyncIterable<{ aid: string; seq: number; bytes: Uint8Array }> {
    for await (const rows of this.snapshot<{ aid: string; seq: string; bytes: Buffer }>(
      (s) => s`
      select aid, seq, bytes from history order by aid, seq`,
    ))
      for (const row of rows) yield { aid: row.aid, seq: num(row.seq), bytes: u8(row.bytes) };
  }

  async entries(keys: { aid: string; seq: number }[]): Promise<(Uint8Array | undefined)[]> {
    if (keys.length === 0) return [];
    const rows = await this.sql<{ aid: string; seq: string; bytes: Buffer }[]>`
      select h.aid, h.seq, h.bytes from history h
      join unnest(${keys.map((k) => k.aid)}::text[], ${keys.map((k) => k.seq)}::int8[]) as k(aid, seq)
        on h.aid = k.aid and h.seq = k.seq`;
    const found = new Map(rows.map((r) => [`${r.aid}\n${r.seq}`, u8(r.bytes)]));
    return keys.map((k) => found.get(`${k.aid}\n${k.seq}`));
  }

  async heldTotal(): Promise<bigint> {
    const [row] = await this.sql<{ total: string }[]>`select coalesce(sum(amount), 0)::text as total from holds where state = 'held'`;
    return BigInt(row!.total);
  }

  async minted(): Promise<string> {
    const [row] = await this.sql<{ value: string }[]>`select value from meta where key = ${MINTED}`;
    return row?.value ?? '0';
  }

  /**
   * Streams a query's rows in batches from one snapshot (REPEATABLE READ, read only, on a connection of its
   * own), so a full check sees one consistent ledger without holding it all in memory.
   */
  private async *snapshot<R extends object>(query: (s: ISql) => PendingQuery<R[]>): AsyncIterable<R[]> {
    const reserved = await this.sql.reserve();
    let open = false;
    try {
      await reserved`begin isolation level repeatable read read only`;
      open = true;
      for await (const rows of query(reserved).cursor(BATCH)) yield rows as R[];
    } finally {
      // Also when the consumer stopped early: end the transaction before the connection goes back.
      if (open) await reserved`rollback`.catch(() => {});
      reserved.release();
    }
  }
}

// ---- Mailboxes ----

class PgMailbox implements MailboxStore {
  constructor(private readonly sql: Sql) {}

  async put(to: string, id: string, bytes: Uint8Array, expires: number, limits: MailboxLimits): Promise<'kept' | 'full'> {
    const n = bytes.byteLength;
    if (limits.perRecipient < 1 || n > limits.perRecipientBytes || n > limits.totalBytes) return 'full';
    return retrying(() => this.sql.begin((tx) => keepMail(tx, to, id, buf(bytes), expires, limits)));
  }

  async list(to: string, now: number): Promise<Mail[]> {
    const rows = await this.sql<{ id: string; bytes: Buffer }[]>`
      select id, bytes from mailbox where recipient = ${to} and expires > ${now} order by seq`;
    return rows.map((r) => ({ id: r.id, bytes: u8(r.bytes) }));
  }

  async ack(to: string, ids: string[]): Promise<number> {
    if (ids.length === 0) return 0;
    return retrying(() =>
      this.sql.begin(async (tx) => {
        const gone = await tx<{ n: number }[]>`
          delete from mailbox where recipient = ${to} and id = any(${ids}::text[]) returning octet_length(bytes) as n`;
        await uncount(tx, [{ recipient: to, envelopes: gone.length, bytes: sum(gone.map((g) => g.n)) }]);
        return gone.length;
      }),
    );
  }

  async sweep(now: number): Promise<number> {
    let swept = 0;
    for (;;) {
      const n = await retrying(() => this.sql.begin((tx) => sweepBatch(tx, now)));
      swept += n;
      if (n < BATCH) return swept;
    }
  }

  async size(): Promise<{ envelopes: number; bytes: number }> {
    const [row] = await this.sql<{ envelopes: string; bytes: string }[]>`select envelopes, bytes from mailbox_total where id = 1`;
    return { envelopes: num(row!.envelopes), bytes: num(row!.bytes) };
  }
}

/**
 * One envelope kept, within the bounds, exactly across replicas: the envelope's row first, then the
 * recipient's counter row and last the one total row, each updated only where the bound still holds.
 * Under READ COMMITTED an UPDATE that waited for a row lock checks its condition again on the row as
 * the other transaction committed it, so no number of replicas can pass a bound even by one envelope.
 * Every mailbox transaction takes its locks in this order (envelope rows, counter rows, total), so
 * whoever holds the total row waits for nothing else; what deadlocks anyway is retried.
 * The cost: mailbox writes take turns on the total row for the length of a commit.
 */
async function keepMail(
  tx: TransactionSql,
  to: string,
  id: string,
  bytes: Buffer,
  expires: number,
  limits: MailboxLimits,
): Promise<'kept' | 'full'> {
  const n = bytes.byteLength;
  const inserted = await tx`
    insert into mailbox (recipient, id, bytes, expires) values (${to}, ${id}, ${bytes}, ${expires})
    on conflict (recipient, id) do nothing returning seq`;
  if (inserted.length === 0) {
    // The same envelope (its id is its bytes' hash) is kept already: keep it as long as either copy asks.
    await tx`update mailbox set expires = greatest(expires, ${expires}) where recipient = ${to} and id = ${id}`;
    return 'kept';
  }
  const counted = await tx`
    insert into mailbox_counts as c (recipient, envelopes, bytes) values (${to}, 1, ${n})
    on conflict (recipient) do update set envelopes = c.envelopes + 1, bytes = c.bytes + excluded.bytes
      where c.envelopes + 1 <= ${limits.perRecipient} and c.bytes + excluded.bytes <= ${limits.perRecipientBytes}
    returning envelopes`;
  const total =
    counted.length === 0
      ? []
      : await tx`
    update mailbox_total set envelopes = envelopes + 1, bytes = bytes + ${n}
    where id = 1 and bytes + ${n} <= ${limits.totalBytes} returning bytes`;
  if (total.length === 0) {
    await tx.rollback();
    return 'full';
  }
  return 'kept';
}

/** Up to BATCH expired envelopes deleted, skipping rows another transaction holds (an ack, another sweep). */
async function sweepBatch(tx: TransactionSql, now: number): Promise<number> {
  const gone = await tx<{ recipient: string; n: number }[]>`
    delete from mailbox where (recipient, id) in (
      select recipient, id from mailbox where expires <= ${now} limit ${BATCH} for update skip locked)
    returning recipient, octet_length(bytes) as n`;
  const per = new Map<string, { recipient: string; envelopes: number; bytes: number }>();
  for (const g of gone) {
    const c = per.get(g.recipient) ?? { recipient: g.recipient, envelopes: 0, bytes: 0 };
    c.envelopes += 1;
    c.bytes += g.n;
    per.set(g.recipient, c);
  }
  await uncount(tx, [...per.values()]);
  return gone.length;
}

/** Takes deleted envelopes off the counters: recipients' rows locked in sorted order, then the total. */
async function uncount(tx: TransactionSql, gone: { recipient: string; envelopes: number; bytes: number }[]): Promise<void> {
  const rows = gone.filter((g) => g.envelopes > 0);
  if (rows.length === 0) return;
  const names = rows.map((g) => g.recipient);
  await tx`select recipient from mailbox_counts where recipient = any(${names}::text[]) order by recipient for update`;
  await tx`
    update mailbox_counts c set envelopes = c.envelopes - d.envelopes, bytes = c.bytes - d.bytes
    from unnest(${names}::text[], ${rows.map((g) => g.envelopes)}::int4[], ${rows.map((g) => g.bytes)}::int8[]) as d(recipient, envelopes, bytes)
    where c.recipient = d.recipient`;
  await tx`delete from mailbox_counts where recipient = any(${names}::text[]) and envelopes <= 0`;
  await tx`
    update mailbox_total set envelopes = envelopes - ${sum(rows.map((g) => g.envelopes))}, bytes = bytes - ${sum(rows.map((g) => g.bytes))}
    where id = 1`;
}

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
