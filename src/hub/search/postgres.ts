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
    // The walks in AID order must take the primary key: costed against a sequential scan of a small table
    // the planner may read and sort every later row instead (90 ms at 10k agents). A read-only transaction,
    // so the setting dies with it.
    found = (await sql.begin('read only', async (tx) => {
      await tx.unsafe('set local enable_seqscan = off');
      return ranked(tx as unknown as Sql, words, filters, after, n);
    })) as Position[];
  }
  const page = found.slice(0, query.limit);
  const next = found.length > query.limit ? encodeCursor(page[page.length - 1]!) : null;
  return { agents: await records(sql, page), next };
}

/** Queries of at most this many words run one AID-ordered query per combination of weights (3 ** words). */
const COMBINE_AT_MOST = 2;

/** Up to `n` agents after the cursor, best first. */
async function ranked(sql: Sql, words: QueryWord[], filters: string | null, after: Position | null, n: number): Promise<Position[]> {
  const low = words.length * SCORE.C;
  // A cursor below the lowest score (another query's) has nothing after it, as in the embedded index.
  if (after !== null && after.score < low) return [];
  if (words.length <= COMBINE_AT_MOST) return combined(sql, words, filters, after, n);
  return split(sql, words, filters, after, n, low);
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

/** How many agents a walk in AID order reads before the parts it did not fill count as rare. */
const WALK = 500;

/** A combination of the weights the words reach: `code` has one base-3 digit a word (0 A, 1 B, 2 C). */
interface Part {
  code: number;
  score: number;
  tsquery: string;
  /** The AID it continues after (the cursor's score), or null from the start. */
  from: string | null;
}

/**
 * One part per combination of the weights the words reach (A, B or C each): all agents of one part score
 * the same, so each part is in AID order and the parts' first `n` hold the page. One walk of at most WALK
 * agents in AID order (two with a cursor: from the start, and from the cursor for its score) sorts what it
 * reads into parts, which fills the common parts; each part left short is rare, and is read through the GIN
 * index and sorted. (Left to the planner, a part that matches nothing but looks common — a marker no agent
 * has — walked the whole primary key: 1 s at 100k agents.)
 */
async function combined(sql: Sql, words: QueryWord[], filters: string | null, after: Position | null, n: number): Promise<Position[]> {
  const parts = partsOf(words, filters).filter((part) => after === null || part.score <= after.score);
  for (const part of parts) part.from = after !== null && part.score === after.score ? after.aid : null;
  const all = and([...words.map((w) => group(w, '')), filters]);
  const starts = [...new Set(parts.map((part) => part.from))];
  const walked = new Map<number, Position[]>(parts.map((part) => [part.code, []]));
  const p = new Params();
  const walks = starts.map((start) => `(${walk(p, words, all, start)})`).join(' union all ');
  for (const row of await sql.unsafe<{ aid: string; code: number; start: string | null }[]>(walks, p.values)) {
    const part = parts.find((x) => x.code === row.code);
    if (part && part.from === row.start) walked.get(part.code)!.push({ score: part.score, aid: row.aid });
  }
  const full = parts.filter((part) => walked.get(part.code)!.length >= n);
  const rare = parts.filter((part) => walked.get(part.code)!.length < n);
  const found = full.flatMap((part) => walked.get(part.code)!.sort(compare).slice(0, n));
  if (rare.length > 0) {
    const q = new Params();
    const text = rare.map((part) => `(${lookup(q, part, n)})`).join(' union all ');
    for (const row of await sql.unsafe<{ aid: string; score: number }[]>(text, q.values)) found.push({ score: row.score, aid: row.aid });
  }
  return found.sort(compare).slice(0, n);
}

/** Every combination of weights for the words, with its score and its tsquery. */
function partsOf(words: QueryWord[], filters: string | null): Part[] {
  let parts: Part[] = [{ code: 0, score: 0, tsquery: filters ?? '', from: null }];
  words.forEach((w, i) => {
    parts = parts.flatMap((part) =>
      weighted(w).map((x, k) => ({
        code: part.code + k * 3 ** i,
        score: part.score + x.score,
        tsquery: part.tsquery === '' ? x.tsquery : `${part.tsquery} & ${x.tsquery}`,
        from: null,
      })),
    );
  });
  return parts;
}

/** The next WALK agents in AID order after `start`: those matching every word, with their part's code. */
function walk(p: Params, words: QueryWord[], all: string, start: string | null): string {
  const code = words
    .map(
      (w, i) => `${3 ** i} * (case when search @@ ${p.of(group(w, MARK.A), 'tsquery')} then 0
      when search @@ ${p.of(group(w, MARK.B), 'tsquery')} then 1 else 2 end)`,
    )
    .join(' + ');
  const from = start === null ? '' : `where aid collate "C" > ${p.of(start, 'text')}`;
  return `select aid, ${code} as code, ${start === null ? 'null::text' : p.of(start, 'text')} as start
    from (select aid, search from agents ${from} order by aid collate "C" limit ${WALK}) w
    where search @@ ${p.of(all, 'tsquery')}`;
}

/** A rare part's first `n`, found through the GIN index (`offset 0` keeps the order out of the scan). */
function lookup(p: Params, part: Part, n: number): string {
  const from = part.from === null ? '' : `and aid collate "C" > ${p.of(part.from, 'text')}`;
  return `select aid, ${p.of(part.score, 'int')} as score
    from (select aid from agents where search @@ ${p.of(part.tsquery, 'tsquery')} ${from} offset 0) g
    order by aid collate "C" limit ${p.of(n, 'int')}`;
}

/** Where a word can match, as disjoint tsqueries: its best weight A, B, or C (descriptions only). */
function weighted(w: QueryWord): { score: number; tsquery: string }[] {
  const a = group(w, MARK.A);
  const b = group(w, MARK.B);
  return [
    { score: SCORE.A, tsquery: a },
    { score: SCORE.B, tsquery: `${b} & !${a}` },
    { score: SCORE.C, tsquery: `${group(w, '')} & !${a} & !${b}` },
  ];
}

/**
 * Longer queries (their matches are few, as a rule): the agents some word reaches in a name, skill or tag,
 * scored in SQL, then those matching in descriptions only, all at the lowest score, in AID order.
 */
async function split(
  sql: Sql,
  words: QueryWord[],
  filters: string | null,
  after: Position | null,
  n: number,
  low: number,
): Promise<Position[]> {
  const all = and([...words.map((w) => group(w, '')), filters]);
  const high = `(${words.map((w) => `${group(w, MARK.A)} | ${group(w, MARK.B)}`).join(' | ')})`;
  const found: Position[] = [];
  if (after === null || after.score > low) found.push(...(await reached(sql, words, `${all} & ${high}`, after, n)));
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
async function reached(sql: Sql, words: QueryWord[], tsquery: string, after: Position | null, n: number): Promise<Position[]> {
  const p = new Params();
  const score = words.map((w) => `(${wordScore(p, w)})`).join(' + ');
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
function wordScore(p: Params, w: QueryWord): string {
  return `case when search @@ ${p.of(group(w, MARK.A), 'tsquery')} then ${SCORE.A}
    when search @@ ${p.of(group(w, MARK.B), 'tsquery')} then ${SCORE.B} else ${SCORE.C} end`;
}

/** A word's forms as tsquery alternatives behind `mark`, as prefixes where fields.ts allows. */
function group(w: QueryWord, mark: string): string {
  return `(${w.forms.map((f) => `'${mark}${f}'${prefixes(f) ? ':*' : ''}`).join(' | ')})`;
}

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
