// The PostgreSQL backend's directory search (SPEC §11, issue 19), by the rules of ./fields.ts. Each agent
// row keeps `search tsvector` (GIN-indexed): its words with the weight of their field (A, B, C), built
// here from the words fields.ts cut and stemmed (not by to_tsvector, whose `english` stemmer and stop
// words differ from ours), plus one unweighted lexeme per skill id and tag (`~s…`, `~t…`: a hash, which no
// query word can begin, since query words are letters and digits) so the exact filters use the index too.
//
// Ranking: not ts_rank / ts_rank_cd. Both add up occurrences, so no choice of weights makes one match in
// the name outrank any number of mentions in descriptions; and they would order differently from the
// embedded index. Instead each query word scores by the best weight it matches (tsquery weight labels:
// `'w':A` exact, `'w':*A` prefix, …), summed: an integer, so the keyset cursor compares exactly.
//
// What the table needs for speed (measured, 10k agents): `aid text collate "C" primary key`, so the AID
// order (code-unit order, as the embedded index sorts) is the primary key's and a search without words
// walks it (140 ms → 1 ms); and `alter table agents alter column search set storage main`, so the vector
// stays in the row rather than compressed out of line, as each `@@` of a ranked search would decompress it
// again (a common word: 450 ms → 22 ms). The queries say `collate "C"` themselves, so they are right either way.
import type { Fragment, Sql } from 'postgres';
import type { AgentRecord, SearchPage, SearchQuery } from '../storage/types.js';
import {
  agentFields,
  decodeCursor,
  encodeCursor,
  filterKey,
  prefixes,
  type Position,
  type QueryWord,
  queryWords,
  SCORE,
  WEIGHTS,
} from './fields.js';

export { BadCursor, BadSearch } from './fields.js';

/** Where each weight's words sit in the vector: one position per weight is all a weight label needs. */
const POSITION = { A: 1, B: 2, C: 3 } as const;

/** The tsvector text of an agent: words quoted (letters and digits only, nothing to escape). */
export function vectorText(rec: AgentRecord): string | null {
  const fields = agentFields(rec);
  if (!fields) return null;
  const places = new Map<string, string[]>();
  for (const w of WEIGHTS) {
    for (const word of fields.words[w]) {
      const list = places.get(word) ?? [];
      list.push(`${POSITION[w]}${w}`);
      places.set(word, list);
    }
  }
  const parts = [...places].map(([word, at]) => `'${word}':${at.join(',')}`);
  for (const skill of fields.skills) parts.push(`'${filterKey('skill', skill)}'`);
  for (const tag of fields.tags) parts.push(`'${filterKey('tag', tag)}'`);
  return parts.join(' ');
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
  score: number;
}

/** One page of a search, best first; `next` continues it. BadCursor / BadSearch as fields.ts says. */
export async function searchAgents(sql: Sql, query: SearchQuery): Promise<SearchPage> {
  const after = query.cursor === null ? null : decodeCursor(query.cursor);
  const filters = filterQuery(query);
  let rows: Row[];
  if (query.words.length === 0) {
    rows = await listed(sql, filters, after, query.limit + 1);
  } else {
    const words = queryWords(query.words);
    if (!words) return { agents: [], next: null };
    rows = await ranked(sql, words, filters, after, query.limit + 1);
  }
  const page = rows.slice(0, query.limit);
  const last = page[page.length - 1];
  const next = rows.length > query.limit && last ? encodeCursor({ score: Number(last.score), aid: last.aid }) : null;
  return { agents: page.map(recordOf), next };
}

/** Agents with a card in AID order ("C" collation: code-unit order, as the embedded index sorts). */
function listed(sql: Sql, filters: string | null, after: Position | null, n: number): Promise<Row[]> {
  return sql<Row[]>`
    select aid, name, kel, card, seq, digest, keys, updated_at, 0 as score from agents
    where search is not null
      ${filters === null ? sql`` : sql`and search @@ ${filters}::tsquery`}
      ${after === null ? sql`` : sql`and aid collate "C" > ${after.aid}`}
    order by aid collate "C" limit ${n}`;
}

/** Agents matching every word, by score then AID: scored on (aid, score) alone, records read for the page. */
function ranked(sql: Sql, words: QueryWord[], filters: string | null, after: Position | null, n: number): Promise<Row[]> {
  const match = words.map((w) => group(w, true, '')).join(' & ');
  const where = filters === null ? match : `${match} & ${filters}`;
  const score = words.map((w) => sql`(${wordScore(sql, w)})`).reduce((x, y) => sql`${x} + ${y}`);
  return sql<Row[]>`
    with scored as (
      select aid, ${score} as score from agents where search @@ ${where}::tsquery
    ), page as (
      select aid, score from scored
      ${after === null ? sql`` : sql`where score < ${after.score} or (score = ${after.score} and aid collate "C" > ${after.aid})`}
      order by score desc, aid collate "C" limit ${n}
    )
    select a.aid, a.name, a.kel, a.card, a.seq, a.digest, a.keys, a.updated_at, page.score
    from page join agents a using (aid)
    order by page.score desc, a.aid collate "C"`;
}

/** A word's score: the first weight label (best first) its exact or prefix forms match under. */
function wordScore(sql: Sql, w: QueryWord): Fragment {
  const levels: [string, number][] = [];
  for (const weight of WEIGHTS) {
    levels.push([group(w, false, weight), SCORE[weight].exact]);
    if (w.forms.some(prefixes)) levels.push([group(w, true, weight), SCORE[weight].prefix]);
  }
  // The last level needs no test: the row matched the word somewhere (A, B or C: every word has a weight).
  const last = levels.pop()!;
  const cases = levels.map(([q, s]) => sql`when search @@ ${q}::tsquery then ${s}::int`);
  return sql`case ${cases} else ${last[1]}::int end`;
}

/** A word's forms as tsquery alternatives (`'f':*A`: prefix, weight A), prefixes only where fields.ts allows. */
function group(w: QueryWord, prefix: boolean, weight: string): string {
  return `(${w.forms.map((f) => `'${f}':${prefix && prefixes(f) ? '*' : ''}${weight}`).join(' | ')})`;
}

/** The filters as tsquery terms (their hashed lexemes), or null without any. */
function filterQuery(query: SearchQuery): string | null {
  const terms: string[] = [];
  if (query.skill !== null) terms.push(`'${filterKey('skill', query.skill)}'`);
  if (query.tag !== null) terms.push(`'${filterKey('tag', query.tag)}'`);
  return terms.length === 0 ? null : terms.join(' & ');
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
