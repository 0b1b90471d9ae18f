// The PostgreSQL backend's directory search (SPEC §11, issue 19), by the rules of ./fields.ts. Each agent
// row keeps `search tsvector` (GIN-indexed), built here from the words fields.ts cut and stemmed (not by
// to_tsvector, whose `english` stemmer and stop words differ from ours): every word of the card once, and
// the weight of the names (A) and of the skill names and tags (B) as marker lexemes, `^word` for A and
// `+word` for B; plus one lexeme per skill id and tag (`~s…`, `~t…`, a hash) for the exact filters. Query
// words are letters and digits only, so no query word can reach a marker or a filter lexeme by prefix.
//
// Why markers and not tsvector weight labels with ts_rank / ts_rank_cd: both ranks add up occurrences, so
// no choice of weights makes one match in a name outrank any number of mentions in descriptions, and they
// would order differently from the embedded index. And a weight label (`'w':A`) is checked only on recheck,
// so the GIN index cannot find "the agents with `w` in a name" by it; a marker it finds directly.
//
// Scores (fields.ts) depend only on the weight each word reached, so a query of one or two words is cut
// into parts, one per score, each the combinations of weights that sum to it (A, B, C per word: `'^w'`,
// `'+w' & !'^w'`, `'w' & !'^w' & !'+w'`), all of one score and so in AID order; one statement reads the
// parts best first under one limit, each only while the page is short (see byClass). A query word's
// prefixes are first turned into the exact words of the vocabulary (`search_words`, migration 3) they
// begin: the GIN index then reads no partial match (two common words: 34 → 8 ms), and the table's
// statistics tell how many agents each part holds, which decides how it is read. Longer queries (few
// matches as a rule) score the agents some word reaches by a marker in SQL, then list the rest, all at the
// lowest score, in AID order. Scores are integers, so the keyset cursor (score, aid) compares exactly.
//
// What the table needs for speed (measured, 10k agents): `aid text collate "C" primary key`, so the AID
// order (code-unit order, as the embedded index sorts) is the primary key's (a search without words: 140 ms
// → 1 ms); and `alter table agents alter column search set storage main`, so the vector stays in the row
// rather than compressed out of line, where each `@@` would decompress it again (a common word: 450 ms →
// 22 ms). The queries say `collate "C"` themselves, so they are right either way, only slower.
import type { Fragment, Sql } from 'postgres';
import type { AgentRecord, SearchPage, SearchQuery } from '../storage/types.js';
import {
  agentFields,
  compare,
  decodeCursor,
  encodeCursor,
  filterKey,
  type Position,
  prefixes,
  type QueryWord,
  queryWords,
  SCORE,
} from './fields.js';

export { BadCursor, BadSearch } from './fields.js';

/** The markers of a word's weight in a vector and a query. */
const MARK = { A: '^', B: '+' } as const;

/** The tsvector text of an agent: lexemes quoted (words are letters and digits; markers and hashes add `^+~`). */
export function vectorText(rec: AgentRecord): string | null {
  const fields = agentFields(rec);
  if (!fields) return null;
  const lexemes = new Set<string>([...fields.words.A, ...fields.words.B, ...fields.words.C]);
  for (const word of fields.words.A) lexemes.add(MARK.A + word);
  for (const word of fields.words.B) lexemes.add(MARK.B + word);
  for (const skill of fields.skills) lexemes.add(filterKey('skill', skill));
  for (const tag of fields.tags) lexemes.add(filterKey('tag', tag));
  return [...lexemes].map((l) => `'${l}'`).join(' ');
}

/** The `search` column's value for a record: its vector, or NULL without a card (not listed). */
export function searchVector(sql: Sql, rec: AgentRecord): Fragment {
  const text = vectorText(rec);
  return text === null ? sql`null::tsvector` : sql`${text}::tsvector`;
}

/** An `agents` row as the postgres client reads it (bytea as Buffer, int8 as a string). */
export interface AgentRow {
  aid: string;
  name: string;
  kel: Uint8Array;
  card: string | null;
  seq: string | null;
  digest: string | null;
  keys: Uint8Array | null;
  updated_at: string | number;
}

/**
 * The settings a search's statements are planned under. The walks in AID order must take the primary
 * key: costed against a sequential scan of a small table the planner may read and sort every later row
 * instead (90 ms at 10k agents). No parallel plan: the parts' rows must come in the order they are listed
 * (see byClass). A pool of sessions started with them (the hub's) passes `settled`; any other pool gets
 * them for each search in a read-only transaction, three round trips more.
 */
export const SEARCH_SETTINGS = { enable_seqscan: 'off', max_parallel_workers_per_gather: '0' } as const;

/** One page of a search, best first; `next` continues it. BadCursor / BadSearch as fields.ts says. */
export async function searchAgents(sql: Sql, query: SearchQuery, settled = false): Promise<SearchPage> {
  const after = query.cursor === null ? null : decodeCursor(query.cursor);
  const filters = filterQuery(query);
  const n = query.limit + 1;
  let found: Found[];
  if (query.words.length === 0) {
    found = await inAidOrder(sql, filters === null ? null : filters, 0, after, n);
  } else {
    const words = queryWords(query.words);
    if (!words) return { agents: [], next: null };
    const terms = await expand(sql, words);
    if (terms.some((t) => t.exact.length === 0 && t.prefix.length === 0)) return { agents: [], next: null };
    const st = await stats(sql);
    found = settled
      ? await ranked(sql, st, terms, filters, after, n)
      : ((await sql.begin('read only', async (tx) => {
          const settings = Object.entries(SEARCH_SETTINGS).map(([k, v]) => `set local ${k} = ${v}`);
          await tx.unsafe(settings.join('; '));
          return ranked(tx as unknown as Sql, st, terms, filters, after, n);
        })) as Found[]);
  }
  const page = found.slice(0, query.limit);
  const next = found.length > query.limit ? encodeCursor(page[page.length - 1]!) : null;
  return { agents: await records(sql, page), next };
}

/**
 * A query word as tsquery lexemes: `exact`, the words of the vocabulary it equals or begins (in any of its
 * forms), and `prefix`, forms left to the index as prefixes (`'w':*`) where the vocabulary was not asked.
 * Both empty: no agent has the word.
 */
interface Terms {
  exact: string[];
  prefix: string[];
}

/** A prefix that begins more words of the vocabulary than this stays a prefix (`'w':*`): a shorter tsquery. */
const EXPAND_AT_MOST = 200;

/** The query's words as lexemes, by the vocabulary when it is complete (else as prefixes, as it always ranks the same). */
async function expand(sql: Sql, words: QueryWord[]): Promise<Terms[]> {
  const forms = [...new Set(words.flatMap((w) => w.forms.filter(prefixes)))];
  const begun = forms.length === 0 ? new Map<string, string[]>() : await vocabulary(sql, forms);
  return words.map((w) => {
    const exact = new Set<string>();
    const prefix: string[] = [];
    for (const form of w.forms) {
      const found = prefixes(form) ? begun?.get(form) : [form];
      if (found === undefined) prefix.push(form);
      else for (const word of found) exact.add(word);
    }
    return { exact: [...exact], prefix };
  });
}

/**
 * The vocabulary's words each form equals or begins, by form; a form that begins too many is left out.
 * null while the vocabulary is not complete (being filled at start), or absent (a table made without the
 * migrations): the words are then prefixes in the tsquery, slower for common ones but the same matches.
 */
async function vocabulary(sql: Sql, forms: string[]): Promise<Map<string, string[]> | null> {
  let rows: { form: string; words: string[]; complete: boolean }[];
  try {
    rows = await sql.unsafe(
      `select form, array(select word from search_words where word >= form and word < form || chr(1114111)
         order by word limit ${EXPAND_AT_MOST + 1}) as words,
       not exists (select 1 from meta where key = '${BACKFILL_KEY}') as complete
       from unnest($1::text[]) form`,
      [forms],
    );
  } catch (err) {
    if ((err as { code?: string }).code === '42P01') return null; // undefined_table
    throw err;
  }
  if (!rows[0]?.complete) return null;
  return new Map(rows.filter((r) => r.words.length <= EXPAND_AT_MOST).map((r) => [r.form, r.words]));
}

/** The `meta` row that says the vocabulary is still being filled, and after which AID. */
export const BACKFILL_KEY = 'search_words_backfill';

/**
 * What ANALYZE found of the `search` column: each common lexeme's share of the agents, the share the
 * least common of them has (an upper bound for every other lexeme), and the table's size now (its rows
 * per page then, times its pages now). The migration keeps 10,000 lexemes (statistics 1000).
 */
interface Stats {
  agents: number;
  share: Map<string, number>;
  floor: number;
}

/** Stats are read again after this long (ANALYZE runs every so often; the table grows meanwhile). */
const STATS_FOR_MS = 60_000;
/** Without stats, this long: the ANALYZE asked for is done in seconds. */
const NO_STATS_FOR_MS = 2_000;
const statsKept = new WeakMap<Sql, { until: number; stats: Promise<Stats | null>; analyzed?: boolean }>();

/**
 * The stats of the `agents` table, kept a while per pool; null before its first ANALYZE, which is then
 * asked for once (autovacuum would run it within a minute or so; a table just filled would meanwhile be
 * searched by walks alone).
 */
function stats(sql: Sql): Promise<Stats | null> {
  const kept = statsKept.get(sql);
  if (kept && kept.until > Date.now()) return kept.stats;
  const entry = { until: Date.now() + STATS_FOR_MS, stats: readStats(sql).catch(() => null), analyzed: kept?.analyzed };
  statsKept.set(sql, entry);
  void entry.stats.then((st) => {
    if (st !== null) return;
    entry.until = Date.now() + NO_STATS_FOR_MS;
    if (entry.analyzed) return;
    entry.analyzed = true;
    sql.unsafe('analyze agents').catch(() => {});
  });
  return entry.stats;
}

async function readStats(sql: Sql): Promise<Stats | null> {
  const [row] = await sql.unsafe<{ elems: string[] | null; freqs: number[] | null; agents: number }[]>(
    `select s.most_common_elems::text::text[] as elems, s.most_common_elem_freqs as freqs,
       case when c.relpages > 0 then c.reltuples / c.relpages * (pg_relation_size(c.oid) / current_setting('block_size')::int)
       else c.reltuples end::float8 as agents
     from pg_class c join pg_namespace ns on ns.oid = c.relnamespace
     left join pg_stats s on s.schemaname = ns.nspname and s.tablename = c.relname and s.attname = 'search'
     where c.oid = 'agents'::regclass`,
  );
  if (!row?.elems || !row.freqs || row.agents <= 0) return null;
  const share = new Map(row.elems.map((e, i) => [e, row.freqs![i]!]));
  return { agents: row.agents, share, floor: row.freqs[row.elems.length] ?? 1 };
}

/**
 * How many agents class `c` holds, as the statistics suggest: per combination, the product of each word's
 * share at its weight. A guess (words are not independent): `part` stays cheap when it is wrong.
 */
function estimate(st: Stats, terms: Terms[], c: Class): number {
  const combos = c.combos.map((weights) => weights.reduce((x, k, i) => x * termShare(st, terms[i]!, k), 1));
  return st.agents * combos.reduce((x, y) => x + y, 0);
}

/**
 * A word's share of the agents at weight `k` (0 A, 1 B, 2 anywhere): its lexemes' shares added, a lexeme
 * outside the statistics at the least share kept; a word left as a prefix, all agents.
 */
function termShare(st: Stats, t: Terms, k: number): number {
  if (t.prefix.length > 0) return 1;
  const mark = [MARK.A, MARK.B, ''][k]!;
  const sum = t.exact.reduce((x, l) => x + (st.share.get(mark + l) ?? st.floor), 0);
  return Math.min(1, sum);
}

/**
 * How far a walk reads: √(n × agents), where walking on and reading the GIN index cost alike (1,449 at
 * 100k agents and a page of 20); WALK without statistics.
 */
const spanOf = (st: Stats | null, n: number) => (st === null ? WALK : Math.round(Math.min(5000, Math.max(200, Math.sqrt(n * st.agents)))));

/** How far a walk reads while the table has no statistics. */
const WALK = 500;

/** Queries of at most this many words run one AID-ordered part per score (up to 3 ** words combinations each). */
const COMBINE_AT_MOST = 2;

/** Up to `n` agents after the cursor, best first. */
async function ranked(
  sql: Sql,
  st: Stats | null,
  terms: Terms[],
  filters: string | null,
  after: Position | null,
  n: number,
): Promise<Found[]> {
  const low = terms.length * SCORE.C;
  // A cursor below the lowest score (another query's) has nothing after it, as in the embedded index.
  if (after !== null && after.score < low) return [];
  if (terms.length <= COMBINE_AT_MOST) return byClass(sql, st, terms, filters, after, n);
  return split(sql, terms, filters, after, n, low);
}

/**
 * A search's text and parameters. Searches run as unnamed statements (`sql.unsafe`), never prepared: so
 * PostgreSQL plans each with its tsquery in hand. A prepared statement falls back to a generic plan after
 * five runs, one plan for every word, which walks the whole primary key for a rare word or reads every
 * match of a common one (measured at 10k agents: p99 35 → 79 ms). Every value is a parameter.
 */
class Params {
  readonly values: (string | number)[] = [];

  /** The placeholder of `value`, cast to `type`. */
  of(value: string | number, type: 'text' | 'int' | 'tsquery'): string {
    this.values.push(value);
    return `$${this.values.length}::${type}`;
  }

  /**
   * A tsquery the planner does not look into (a subquery's value): where the statement fixes the plan's
   * shape itself, estimating each `@@` from the column's 10,000 most common lexemes only costs planning
   * time (3.7 ms for a one-word page at 100k agents). The GIN index serves it all the same.
   */
  opaque(tsquery: string): string {
    return `(select ${this.of(tsquery, 'tsquery')})`;
  }
}

/** The agents of one score: every combination of weights (A, B or C a word) that sums to it. */
interface Class {
  score: number;
  tsquery: string;
  /** Its combinations: the weight each word reaches, by index (0 A, 1 B, 2 C). */
  combos: number[][];
  /** The AID it continues after (the cursor's, for the cursor's score), or null from the start. */
  from: string | null;
}

/**
 * One statement: a part per score, best first, each the first `n` of its agents in AID order after the
 * cursor, under one `limit n`. All agents of a part score the same, so the parts in turn are the result
 * order, and PostgreSQL reads a part only while the page is short: the common low scores are never read
 * when the high ones fill the page. How each part is read is chosen here, not by the planner (whose
 * guess for a lexeme outside its statistics, 0.5 % of the table, once walked the whole primary key for
 * a rare word: 800 ms at 100k agents); see `part`.
 */
async function byClass(
  sql: Sql,
  st: Stats | null,
  terms: Terms[],
  filters: string | null,
  after: Position | null,
  n: number,
): Promise<Found[]> {
  const span = spanOf(st, n);
  const p = new Params();
  const parts = classesOf(terms, filters)
    .filter((c) => after === null || c.score <= after.score)
    .map((c) => ({ ...c, from: after !== null && c.score === after.score ? after.aid : null }))
    .map((c) => {
      const gin = st !== null && estimate(st, terms, c) <= GIN_ROWS;
      return `(select aid, ${c.score} as score from (${part(p, c, gin, span)}) x limit ${n})`;
    });
  if (parts.length === 0) return [];
  // No parallel plan runs here (max_parallel_workers_per_gather = 0): the parts come in their order. The
  // page's records come with it, in the same round trip and snapshot.
  const rows = await sql.unsafe<(AgentRow & { score: number })[]>(
    `select r.score, ${COLUMNS.map((c) => `a.${c}`).join(', ')}
     from (select aid, score from (${parts.join(' union all ')}) parts limit ${n}) r join agents a on a.aid = r.aid`,
    p.values,
  );
  return rows.map((r) => ({ score: r.score, aid: r.aid, row: r })).sort(compare);
}

/**
 * A part estimated at most this many agents is read through the GIN index, then sorted (about 3.5 µs a
 * row at 100k agents); a larger one, or any without statistics, is walked.
 */
const GIN_ROWS = 2000;

/**
 * The AIDs of a class after its start, in AID order. `gin`: all of them through the GIN index, then sorted
 * (`offset 0` keeps the AID order and condition out of the scan: as an index condition it would read the
 * rest of the primary key into a bitmap). Else a walk of at most `span` agents in AID order, then the GIN
 * index for what comes after them: never much more than 2 × span rows, however wrong the estimate (when
 * the walk found fewer than `n`, the class holds fewer than n / span of the agents, so the GIN index reads
 * fewer than n × agents / span = span rows of it).
 */
function part(p: Params, c: Class, gin: boolean, span: number): string {
  const q = p.opaque(c.tsquery);
  const from = c.from === null ? 'true' : `aid collate "C" > ${p.of(c.from, 'text')}`;
  const indexed = (where: string) =>
    `select aid from (select aid from agents where search @@ ${q} offset 0) g where ${where} order by aid collate "C"`;
  if (gin) return indexed(from);
  const walked = `select aid, search from agents where ${from} order by aid collate "C" limit ${span}`;
  return `(select aid from (${walked}) w where search @@ ${q} order by aid collate "C")
    union all
    (${indexed(`aid collate "C" > (select max(aid collate "C") from (${walked}) b)`)})`;
}

/** The score classes of a query, best first, each as a tsquery of its combinations. */
function classesOf(terms: Terms[], filters: string | null): Class[] {
  let combos = [{ score: 0, weights: [] as number[], tsquery: [] as string[] }];
  for (const t of terms) {
    combos = combos.flatMap((c) =>
      weighted(t).map((x, k) => ({ score: c.score + x.score, weights: [...c.weights, k], tsquery: [...c.tsquery, x.tsquery] })),
    );
  }
  const byScore = new Map<number, typeof combos>();
  for (const c of combos) byScore.set(c.score, [...(byScore.get(c.score) ?? []), c]);
  return [...byScore.entries()]
    .sort((x, y) => y[0] - x[0])
    .map(([score, cs]) => ({
      score,
      tsquery: and([`(${cs.map((c) => `(${c.tsquery.join(' & ')})`).join(' | ')})`, filters]),
      combos: cs.map((c) => c.weights),
      from: null,
    }));
}

/** Where a word can match, as disjoint tsqueries: its best weight A, B, or C (descriptions only). */
function weighted(t: Terms): { score: number; tsquery: string }[] {
  const a = group(t, MARK.A);
  const b = group(t, MARK.B);
  return [
    { score: SCORE.A, tsquery: a },
    { score: SCORE.B, tsquery: `${b} & !${a}` },
    { score: SCORE.C, tsquery: `${group(t, '')} & !${a} & !${b}` },
  ];
}

/**
 * Longer queries (their matches are few, as a rule): the agents some word reaches in a name, skill or tag,
 * scored in SQL, then those matching in descriptions only, all at the lowest score, in AID order.
 */
async function split(
  sql: Sql,
  terms: Terms[],
  filters: string | null,
  after: Position | null,
  n: number,
  low: number,
): Promise<Position[]> {
  const all = and([...terms.map((t) => group(t, '')), filters]);
  const high = `(${terms.map((t) => `${group(t, MARK.A)} | ${group(t, MARK.B)}`).join(' | ')})`;
  const found: Position[] = [];
  if (after === null || after.score > low) found.push(...(await reached(sql, terms, `${all} & ${high}`, after, n)));
  if (found.length < n) {
    const from = after !== null && after.score === low ? after : null;
    found.push(...(await inAidOrder(sql, `${all} & !${high}`, low, from, n - found.length)));
  }
  return found;
}

/** The agents matching `tsquery` (all of any, when null) in AID order after `after`, each at `score`. */
async function inAidOrder(sql: Sql, tsquery: string | null, score: number, after: Position | null, n: number): Promise<Position[]> {
  const p = new Params();
  const rows = await sql.unsafe<{ aid: string }[]>(
    `select aid from agents
     where search ${tsquery === null ? 'is not null' : `@@ ${p.of(tsquery, 'tsquery')}`}
       ${after === null ? '' : `and aid collate "C" > ${p.of(after.aid, 'text')}`}
     order by aid collate "C" limit ${p.of(n, 'int')}`,
    p.values,
  );
  return rows.map((r) => ({ score, aid: r.aid }));
}

/** The agents matching `tsquery`, scored, by score then AID, after `after`. */
async function reached(sql: Sql, terms: Terms[], tsquery: string, after: Position | null, n: number): Promise<Position[]> {
  const p = new Params();
  const score = terms.map((t) => `(${wordScore(p, t)})`).join(' + ');
  const from =
    after === null
      ? ''
      : `where score < ${p.of(after.score, 'int')} or (score = ${p.of(after.score, 'int')} and aid collate "C" > ${p.of(after.aid, 'text')})`;
  const rows = await sql.unsafe<{ aid: string; score: number }[]>(
    `select aid, score from (select aid, ${score} as score from agents where search @@ ${p.of(tsquery, 'tsquery')}) scored
     ${from} order by score desc, aid collate "C" limit ${p.of(n, 'int')}`,
    p.values,
  );
  return rows.map((r) => ({ score: r.score, aid: r.aid }));
}

/** A word's score: A where it reaches an A marker, else B where a B marker, else C. */
function wordScore(p: Params, t: Terms, opaque = false): string {
  const q = (x: string) => (opaque ? p.opaque(x) : p.of(x, 'tsquery'));
  return `case when search @@ ${q(group(t, MARK.A))} then ${SCORE.A}
    when search @@ ${q(group(t, MARK.B))} then ${SCORE.B} else ${SCORE.C} end`;
}

/** A word's lexemes as tsquery alternatives behind `mark`: the exact ones, and the prefixes as prefixes. */
function group(t: Terms, mark: string): string {
  const lexemes = [...t.exact.map((l) => quote(mark + l)), ...t.prefix.map((f) => `${quote(mark + f)}:*`)];
  return `(${lexemes.join(' | ')})`;
}

/** A lexeme quoted for a tsquery (words are letters and digits, so this only guards). */
const quote = (lexeme: string) => `'${lexeme.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`;

const and = (terms: (string | null)[]) => terms.filter((x): x is string => x !== null).join(' & ');

/** The filters as tsquery terms (their hashed lexemes), or null without any. */
function filterQuery(query: SearchQuery): string | null {
  const terms: string[] = [];
  if (query.skill !== null) terms.push(`'${filterKey('skill', query.skill)}'`);
  if (query.tag !== null) terms.push(`'${filterKey('tag', query.tag)}'`);
  return terms.length === 0 ? null : terms.join(' & ');
}

/** The columns of an AgentRow. */
const COLUMNS = ['aid', 'name', 'kel', 'card', 'seq', 'digest', 'keys', 'updated_at'] as const;

/** A place in the result order, with its row when the query that found it read that too. */
type Found = Position & { row?: AgentRow };

/** The records of a page, in its order: the rows found with it, the others read. */
async function records(sql: Sql, page: Found[]): Promise<AgentRecord[]> {
  const missing = page.filter((p) => p.row === undefined).map((p) => p.aid);
  const rows =
    missing.length === 0
      ? []
      : await sql<AgentRow[]>`
    select aid, name, kel, card, seq, digest, keys, updated_at from agents
    where aid in ${sql(missing)} and search is not null`;
  const byAid = new Map([...page.flatMap((p) => (p.row ? [p.row] : [])), ...rows].map((r) => [r.aid, r]));
  return page.flatMap((p) => {
    const row = byAid.get(p.aid);
    return row ? [agentFromRow(row)] : [];
  });
}

/** The record of an `agents` row (copies of its bytes, as Uint8Array: the storage's one shape on both backends). */
export function agentFromRow(row: AgentRow): AgentRecord {
  const rec: AgentRecord = {
    aid: row.aid,
    name: row.name,
    kel: new Uint8Array(row.kel),
    card: row.card,
    seq: row.seq,
    digest: row.digest,
    updatedAt: Number(row.updated_at),
  };
  if (row.keys) rec.keys = new Uint8Array(row.keys);
  return rec;
}
