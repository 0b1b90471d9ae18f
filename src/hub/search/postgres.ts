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
// Scores (fields.ts) depend only on the weight each word reached, so a query of one or two words runs as
// one AID-ordered part per combination of weights (A, B, C per word: `'^w':*`, `'+w':* & !'^w':*`,
// `'w':* & !'^w':* & !'+w':*`): PostgreSQL walks the primary key for a common part and stops after a page,
// or takes the GIN index for a rare one, and the page is the best of the parts' first rows. Longer queries
// (few matches as a rule) score the agents some word reaches by a marker in SQL, then list the rest, all
// at the lowest score, in AID order. Scores are integers, so the keyset cursor compares exactly.
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

interface Row {
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
    found = await ranked(sql, words, filters, after, n);
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

/**
 * One query per combination of the weights the words reach (A, B or C each): all agents of one combination
 * score the same, so each part is in AID order and PostgreSQL picks, per part, a walk of the primary key
 * that stops after `n` (a common word) or the GIN index (a rare one). The parts' first `n` hold the page.
 */
async function combined(sql: Sql, words: QueryWord[], filters: string | null, after: Position | null, n: number): Promise<Position[]> {
  let combos: { score: number; terms: string[] }[] = [{ score: 0, terms: filters === null ? [] : [filters] }];
  for (const w of words) {
    combos = combos.flatMap((c) => weighted(w).map((x) => ({ score: c.score + x.score, terms: [...c.terms, x.tsquery] })));
  }
  const p = new Params();
  const parts = combos
    .filter((c) => after === null || c.score <= after.score)
    .map((c) => {
      const from = after !== null && c.score === after.score ? `and aid collate "C" > ${p.of(after.aid, 'text')}` : '';
      return `(select aid, ${p.of(c.score, 'int')} as score from agents where search @@ ${p.of(c.terms.join(' & '), 'tsquery')}
        ${from} order by aid collate "C" limit ${p.of(n, 'int')})`;
    });
  if (parts.length === 0) return [];
  const rows = await sql.unsafe<{ aid: string; score: number }[]>(parts.join(' union all '), p.values);
  return rows
    .map((r) => ({ score: r.score, aid: r.aid }))
    .sort(compare)
    .slice(0, n);
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
  const rows = await sql<Row[]>`
    select aid, name, kel, card, seq, digest, keys, updated_at from agents
    where aid in ${sql(page.map((p) => p.aid))} and search is not null`;
  const byAid = new Map(rows.map((r) => [r.aid, r]));
  return page.flatMap((p) => {
    const row = byAid.get(p.aid);
    return row ? [recordOf(row)] : [];
  });
}

function recordOf(row: Row): AgentRecord {
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
