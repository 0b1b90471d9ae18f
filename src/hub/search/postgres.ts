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
// into parts, one per combination of weights (A, B, C per word: `'^w':*`, `'+w':* & !'^w':*`,
// `'w':* & !'^w':* & !'+w':*`), each all of one score and so in AID order. One bounded walk of the primary
// key sorts what it reads into parts, which fills the common parts without reading every match of a common
// word; the parts it left short are rare, and are read through the GIN index and sorted; the page is the
// best of the parts' first rows. Longer queries (few matches as a rule) score the agents some word reaches
// by a marker in SQL, then list the rest, all at the lowest score, in AID order. Scores are integers, so
// the keyset cursor (score, aid) compares exactly.
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

/** One page of a search, best first; `next` continues it. BadCursor / BadSearch as fields.ts says. */
export async function searchAgents(sql: Sql, query: SearchQuery): Promise<SearchPage> {
  const after = query.cursor === null ? null : decodeCursor(query.cursor);
  const filters = filterQuery(query);
  const n = query.limit + 1;
  let found: Position[];
  if (query.words.length === 0) {
    found = await inAidOrder(sql, filters === null ? null : filters, 0, after, n);
  } else {
    const words = queryWords(query.words);
    if (!words) return { agents: [], next: null };
    const terms = await expand(sql, words);
    if (terms.some((t) => t.exact.length === 0 && t.prefix.length === 0)) return { agents: [], next: null };
    // The walks in AID order must take the primary key: costed against a sequential scan of a small table
    // the planner may read and sort every later row instead (90 ms at 10k agents). No parallel plan: the
    // classes' rows must come in the order they are listed (see byClass). A read-only transaction, so the
    // settings die with it.
    found = (await sql.begin('read only', async (tx) => {
      await tx.unsafe('set local enable_seqscan = off; set local max_parallel_workers_per_gather = 0');
      return ranked(tx as unknown as Sql, terms, filters, after, n);
    })) as Position[];
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

/** Queries of at most this many words run one AID-ordered part per score (up to 3 ** words combinations each). */
const COMBINE_AT_MOST = 2;

/** Up to `n` agents after the cursor, best first. */
async function ranked(sql: Sql, terms: Terms[], filters: string | null, after: Position | null, n: number): Promise<Position[]> {
  const low = terms.length * SCORE.C;
  // A cursor below the lowest score (another query's) has nothing after it, as in the embedded index.
  if (after !== null && after.score < low) return [];
  if (terms.length <= COMBINE_AT_MOST) return byClass(sql, terms, filters, after, n);
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
}

/** The agents of one score: every combination of weights (A, B or C a word) that sums to it. */
interface Class {
  score: number;
  tsquery: string;
  /** The AID it continues after (the cursor's, for the cursor's score), or null from the start. */
  from: string | null;
}

/** How many agents a walk in AID order reads to sample how common each class is. */
const WALK = 500;

/**
 * A class that the walk saw at least this often is read on in AID order (about n / share rows), a rarer
 * one through the GIN index (about share × agents rows): the two cost the same at share √(n / agents),
 * 1.4 % at 100k agents and a page of 20, which is 7 in 500.
 */
const COMMON_IN_WALK = 7;

/**
 * Scores per class, best first; every agent of a class scores the same, so each class is in AID order
 * and the page is the first classes' first rows. One walk of WALK agents in AID order (two with a cursor:
 * from the start, and from the cursor for its score) sorts what it reads into classes: a class it found
 * `n` of is done. The others, down to the class where the page is sure to be full, are read in one
 * statement: on in AID order where the walk found the class common (stopping after `n`), through the GIN
 * index where rare (a common word's class of tens of thousands would cost 50+ ms there; a rare one's
 * whole primary key in AID order).
 */
async function byClass(sql: Sql, terms: Terms[], filters: string | null, after: Position | null, n: number): Promise<Position[]> {
  const classes = classesOf(terms, filters)
    .filter((c) => after === null || c.score <= after.score)
    .map((c) => ({ ...c, from: after !== null && c.score === after.score ? after.aid : null }));
  const walked = await walk(sql, terms, filters, [...new Set(classes.map((c) => c.from))]);
  const found: Position[] = [];
  const lookups: { c: Class; common: boolean }[] = [];
  let sure = 0;
  for (const c of classes) {
    if (sure >= n) break;
    const w = walked.get(c.from) ?? { ended: false, rows: [] };
    const mine = w.rows.filter((r) => r.score === c.score);
    if (mine.length >= n || w.ended) found.push(...mine.slice(0, n));
    else lookups.push({ c, common: mine.length >= COMMON_IN_WALK });
    sure += Math.min(n, mine.length);
  }
  if (lookups.length > 0) found.push(...(await lookup(sql, lookups, n)));
  return found.sort(compare).slice(0, n);
}

/** What a walk from one start read: the matches with their scores, and whether it reached the last agent. */
interface Walked {
  ended: boolean;
  rows: Position[];
}

/** The next WALK agents in AID order after each start, those matching every word with their scores. */
async function walk(sql: Sql, terms: Terms[], filters: string | null, starts: (string | null)[]): Promise<Map<string | null, Walked>> {
  const p = new Params();
  const all = p.of(and([...terms.map((t) => group(t, '')), filters]), 'tsquery');
  const score = terms.map((t) => `(${wordScore(p, t)})`).join(' + ');
  const text = starts
    .map((start, i) => {
      const from = start === null ? '' : `where aid collate "C" > ${p.of(start, 'text')}`;
      return `(select ${i} as start, aid, case when search @@ ${all} then ${score} end as score, count(*) over () as walked
        from (select aid, search from agents ${from} order by aid collate "C" limit ${WALK}) w)`;
    })
    .join(' union all ');
  const rows = await sql.unsafe<{ start: number; aid: string; score: number | null; walked: string }[]>(
    `select start, aid, score, walked from (${text}) w where score is not null`,
    p.values,
  );
  // A walk that read fewer than WALK agents reached the last one (known when it matched any).
  const out = new Map<string | null, Walked>(starts.map((s) => [s, { ended: false, rows: [] }]));
  for (const row of rows) {
    const w = out.get(starts[row.start]!)!;
    w.ended = Number(row.walked) < WALK;
    w.rows.push({ score: row.score!, aid: row.aid });
  }
  return out;
}

/**
 * The first `n` of each class after its start, in one statement, classes best first under one `limit n`:
 * PostgreSQL reads a class only while the page is short. A common class walks the primary key (its
 * condition `is true` is nothing the GIN index can serve), a rare one reads the GIN index and sorts
 * (`offset 0` keeps the order out of the scan).
 */
async function lookup(sql: Sql, lookups: { c: Class; common: boolean }[], n: number): Promise<Position[]> {
  const p = new Params();
  const text = lookups
    .map(({ c, common }) => {
      const from = c.from === null ? '' : `and aid collate "C" > ${p.of(c.from, 'text')}`;
      const q = p.of(c.tsquery, 'tsquery');
      return common
        ? `(select aid, ${c.score} as score from agents where (search @@ ${q}) is true ${from} order by aid collate "C" limit ${n})`
        : `(select aid, ${c.score} as score from (select aid from agents where search @@ ${q} ${from} offset 0) g
            order by aid collate "C" limit ${n})`;
    })
    .join(' union all ');
  const rows = await sql.unsafe<{ aid: string; score: number }[]>(`select aid, score from (${text}) parts limit ${n}`, p.values);
  return rows.map((r) => ({ score: r.score, aid: r.aid }));
}
/** The score classes of a query, best first, each as a tsquery of its combinations. */
function classesOf(terms: Terms[], filters: string | null): Class[] {
  let combos = [{ score: 0, tsquery: [] as string[] }];
  for (const t of terms) {
    combos = combos.flatMap((c) => weighted(t).map((x) => ({ score: c.score + x.score, tsquery: [...c.tsquery, x.tsquery] })));
  }
  const byScore = new Map<number, string[]>();
  for (const c of combos) byScore.set(c.score, [...(byScore.get(c.score) ?? []), `(${c.tsquery.join(' & ')})`]);
  return [...byScore.entries()]
    .sort((x, y) => y[0] - x[0])
    .map(([score, alternatives]) => ({ score, tsquery: and([`(${alternatives.join(' | ')})`, filters]), from: null }));
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
function wordScore(p: Params, t: Terms): string {
  return `case when search @@ ${p.of(group(t, MARK.A), 'tsquery')} then ${SCORE.A}
    when search @@ ${p.of(group(t, MARK.B), 'tsquery')} then ${SCORE.B} else ${SCORE.C} end`;
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

/** The records of a page, in its order. */
async function records(sql: Sql, page: Position[]): Promise<AgentRecord[]> {
  if (page.length === 0) return [];
  const rows = await sql<AgentRow[]>`
    select aid, name, kel, card, seq, digest, keys, updated_at from agents
    where aid in ${sql(page.map((p) => p.aid))} and search is not null`;
  const byAid = new Map(rows.map((r) => [r.aid, r]));
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
