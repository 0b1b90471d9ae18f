// The PostgreSQL hub store's schema, as ordered versioned migrations (issue 19). `migrate` runs at every
// start: each missing migration is applied in a transaction of its own, holding a transaction-scoped
// advisory lock, so N replicas starting together on one empty database apply each migration exactly once
// (the others wait on the lock, then find it applied). A database whose schema is newer than this code is
// refused: an older hub would write rows that a newer schema reads differently.
//
// Never edit a migration that was released: add the next version instead.
import type { Sql } from 'postgres';

export interface Migration {
  version: number;
  name: string;
  /** Statements run in one transaction with the simple protocol (no parameters). */
  sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'hub store: meta, agents with search vector, invites, nonces, ledger, mailboxes',
    sql: `
      create table meta (key text primary key, value text not null);
      -- The credits minted in all; there from the start, so a mint locks the row to read it.
      insert into meta (key, value) values ('ledger_minted', '0');

      -- search: the directory's weighted tsvector of the card (src/hub/search/postgres.ts), null without a card.
      -- AIDs sort by code unit ("C"), as LevelDB's keys and the embedded index do, so their indexes give
      -- the orders the hub reads in (directory pages, history in (aid, seq) order) without a sort.
      create table agents (
        aid text collate "C" primary key,
        name text not null,
        kel bytea not null,
        card text,
        seq text,
        digest text,
        keys bytea,
        updated_at bigint not null,
        search tsvector
      );
      create index agents_search on agents using gin (search);
      -- The vector stays in the row, not compressed out of line, where each @@ of a search would
      -- decompress it again (src/hub/search/postgres.ts measured a common word: 450 ms -> 22 ms at 10k agents).
      alter table agents alter column search set storage main;

      create table invites (key text primary key, created_at bigint not null, used_by text, used_at bigint);

      create table nonces (aid text not null, nonce text not null, time bigint not null, primary key (aid, nonce));
      create index nonces_time on nonces (time);

      -- Amounts are integers below 2^63 (the ledger caps what is minted); numeric keeps them exact, and the
      -- checks refuse a negative balance whatever code writes it.
      create table accounts (
        aid text collate "C" primary key,
        balance numeric(20, 0) not null check (balance >= 0),
        held numeric(20, 0) not null check (held >= 0),
        seq bigint not null,
        head text
      );
      create table history (aid text collate "C" not null, seq bigint not null, bytes bytea not null, primary key (aid, seq));
      create table holds (
        nonce text primary key,
        from_aid text,
        to_aid text not null,
        amount numeric(20, 0) not null,
        state text not null,
        at bigint not null,
        expires bigint,
        tx text not null
      );
      create index holds_due on holds (expires) where state = 'held';
      -- One payer's due holds (dueOf), read and locked through this index without touching other payers'.
      create index holds_payer_due on holds (from_aid, expires) where state = 'held';
      -- answer: the op's answer as JSON text, exactly as the ledger gave it.
      create table ops (key text primary key, digest text not null, answer text);

      -- Sealed envelopes for offline recipients: no sender, no plaintext (WIRE §4).
      create table mailbox (
        recipient text not null,
        id text not null,
        bytes bytea not null,
        expires bigint not null,
        seq bigserial not null,
        primary key (recipient, id)
      );
      create index mailbox_expires on mailbox (expires);
      create index mailbox_order on mailbox (recipient, seq);
      -- Counters for the bounds: a row per recipient with mail, and one for all (see MailboxStore.put).
      create table mailbox_counts (recipient text primary key, envelopes integer not null, bytes bigint not null);
      create table mailbox_total (id integer primary key check (id = 1), envelopes bigint not null, bytes bigint not null);
      insert into mailbox_total values (1, 0, 0);
    `,
  },
  {
    version: 2,
    name: 'blobs: file ciphertexts by content address, in 1 MiB pieces, and their total (issue 20)',
    sql: `
      -- A blob's record: never who uploaded it, nor any task or envelope. id names its pieces, so the
      -- pieces of a deleted blob (removed in small batches after its row) are never taken for those of a
      -- new upload of the same cid.
      create table blobs (
        cid text primary key,
        id bigint generated always as identity unique,
        size bigint not null,
        received bigint not null,
        complete boolean not null,
        served bigint not null,
        created bigint not null,
        updated bigint not null,
        expires bigint not null
      );
      create index blobs_expires on blobs (expires);
      create index blobs_idle on blobs (updated) where not complete;
      create table blob_pieces (blob bigint not null, idx integer not null, bytes bytea not null, primary key (blob, idx));
      -- Ciphertext does not compress: stored out of line as it is, without trying.
      alter table blob_pieces alter column bytes set storage external;
      -- The bytes blobs count, in all (see BlobStore.begin), updated under its row lock.
      create table blob_total (id integer primary key check (id = 1), blobs bigint not null, bytes bigint not null);
      insert into blob_total values (1, 0, 0);
    `,
  },
  {
    version: 3,
    name: 'directory vocabulary: every word of a search vector, kept by triggers, so a query expands its prefixes',
    sql: `
      -- search_words: every word (lexeme without a marker) some agent's search vector holds or held, in code-unit
      -- order, so a search turns a prefix into the exact lexemes it begins (src/hub/search/postgres.ts): the
      -- planner then knows how common each is, and the GIN index reads no partial match. Kept by the
      -- database itself, so a replica still running an older hub keeps it too; words of withdrawn cards stay
      -- (a lexeme no agent has matches nothing).
      create table search_words (word text collate "C" primary key);
      -- Inserted in code-unit order: two writers adding the same new words take their locks in one order.
      create function search_words_add() returns trigger language plpgsql as $f$
      begin
        insert into search_words (word)
          select w from unnest(tsvector_to_array(new.search)) w
          where left(w, 1) not in ('^', '+', '~')
          order by w collate "C"
          on conflict do nothing;
        return null;
      end
      $f$;
      create trigger agents_search_words_insert after insert on agents
        for each row when (new.search is not null) execute function search_words_add();
      create trigger agents_search_words_update after update of search on agents
        for each row when (new.search is not null and new.search is distinct from old.search) execute function search_words_add();
      -- Statistics on 10,000 lexemes rather than 1,000: a search estimates how many agents each part of a
      -- query holds from them (a lexeme outside them counts as common as the least common kept, 1.3 % of
      -- 100k agents with 1,000, 0.07 % with 10,000) to read a rare part through the GIN index. ANALYZE of
      -- 100k agents: 0.6 -> 2.9 s.
      alter table agents alter column search set statistics 1000;
      -- New cards wait in the GIN index's pending list until it is merged, and every search scans that
      -- list whole, once for each part of a query it reads: at the default 4 MB, after a burst of writes,
      -- p50 5.8 -> 12 ms at 100k agents. At the least, 64 kB, it is merged often and costs nothing to scan
      -- (and cards were written faster: 800 -> 1,000 a second; without a pending list, 550).
      alter index agents_search set (gin_pending_list_limit = 64);
      -- The agents already stored are read at start in batches (fillSearchWords in storage/postgres.ts); until
      -- this row is gone, searches use prefixes.
      insert into meta (key, value) values ('search_words_backfill', '');
    `,
  },
];

/** The newest schema version this code knows. */
export const SCHEMA_VERSION = MIGRATIONS.reduce((v, m) => Math.max(v, m.version), 0);

/** A database written by a newer hub. */
export class SchemaTooNewError extends Error {
  override name = 'SchemaTooNewError';
  constructor(where: string, found: number, known: number) {
    super(
      `the hub database at ${where} has schema version ${found}, newer than version ${known} that this hub knows: upgrade this hub (anet) to the version the other replicas run`,
    );
  }
}

/** One key for the migration lock of every anet hub ('anet-hub' as ASCII, fits an int8). */
const LOCK_KEY = '0x616e65742d687562';

/** Applies every missing migration in order, one transaction each; returns the versions it applied. */
export async function migrate(sql: Sql, where: string, now: () => number = Date.now): Promise<number[]> {
  const applied: number[] = [];
  for (;;) {
    const version = await applyNext(sql, where, now);
    if (version === null) return applied;
    applied.push(version);
  }
}

/** Applies the first missing migration under the lock: its version, or null when none is missing. */
async function applyNext(sql: Sql, where: string, now: () => number): Promise<number | null> {
  return sql.begin(async (tx) => {
    await tx.unsafe(`select pg_advisory_xact_lock(${BigInt(LOCK_KEY)})`);
    await tx`create table if not exists schema_migrations (version integer primary key, name text not null, applied_at bigint not null)`;
    const rows = await tx<{ version: number }[]>`select version from schema_migrations`;
    const done = new Set(rows.map((r) => r.version));
    const newest = Math.max(0, ...done);
    if (newest > SCHEMA_VERSION) throw new SchemaTooNewError(where, newest, SCHEMA_VERSION);
    // The lowest missing version first, whatever order the list was written in.
    const next = [...MIGRATIONS].sort((a, b) => a.version - b.version).find((m) => !done.has(m.version));
    if (!next) return null;
    await tx.unsafe(next.sql);
    await tx`insert into schema_migrations (version, name, applied_at) values (${next.version}, ${next.name}, ${now()})`;
    return next.version;
  });
}
