// The embedded backend's directory index (SPEC §11, issue 19): an in-process full-text index (`minisearch`)
// over every agent with a card, kept by the LevelDB store: built from all records at start, then `set` on
// every write. minisearch finds the agents that match every query word (prefixes included); the score and
// the order are the shared rules of ./fields.ts, computed from which of the agent's fields each word
// matched, so this index and PostgreSQL rank alike. The filters (skill id, tag) are answered from what the
// index keeps per agent: no record is read until the page is known.
import MiniSearch from 'minisearch';
import type { AgentRecord, SearchPage, SearchQuery } from '../storage/types.js';
import {
  type AgentFields,
  compare,
  decodeCursor,
  encodeCursor,
  matchOf,
  type Position,
  type QueryWord,
  queryWords,
  SCORE,
  WEIGHTS,
  type Weight,
  agentFields,
} from './fields.js';

export { BadCursor, BadSearch } from './fields.js';

/** A document as minisearch indexes it: one field per weight, words already cut and stemmed. */
interface Doc {
  id: string;
  A: string;
  B: string;
  C: string;
}

/** What the index keeps per agent beside minisearch: the filters' values. */
interface Entry {
  skills: string[];
  tags: string[];
}

/** A filter-only search sorts the filter's agents when there are at most this many, else walks all in order. */
const SORT_AT_MOST = 5000;

export class DirectoryIndex {
  private readonly mini = new MiniSearch<Doc>({
    fields: WEIGHTS as Weight[],
    // The words arrive cut, lowercased and stemmed by fields.ts: minisearch must not change them.
    tokenize: (text) => text.split(' '),
    processTerm: (term) => term || null,
  });
  private readonly entries = new Map<string, Entry>();
  /** The AIDs with a card, in AID order (the order of a search without words). */
  private readonly sorted: string[] = [];
  private readonly bySkill = new Map<string, Set<string>>();
  private readonly byTag = new Map<string, Set<string>>();

  /** Agents listed. */
  get size(): number {
    return this.entries.size;
  }

  /** Adds or replaces an agent; one without a card (withdrawn, or not JSON) is removed. */
  set(rec: AgentRecord): void {
    const fields = agentFields(rec);
    if (!fields) {
      this.remove(rec.aid);
      return;
    }
    const doc = { id: rec.aid, A: fields.words.A.join(' '), B: fields.words.B.join(' '), C: fields.words.C.join(' ') };
    if (this.entries.has(rec.aid)) {
      this.unfilter(rec.aid);
      this.mini.replace(doc);
    } else {
      this.mini.add(doc);
      this.sorted.splice(this.place(rec.aid), 0, rec.aid);
    }
    this.entries.set(rec.aid, { skills: fields.skills, tags: fields.tags });
    this.refilter(rec.aid, fields);
  }

  remove(aid: string): void {
    if (!this.entries.has(aid)) return;
    this.unfilter(aid);
    this.entries.delete(aid);
    this.mini.discard(aid);
    this.sorted.splice(this.place(aid), 1);
  }

  /**
   * One page of a search. `get` reads a record by AID (the store's); a record gone since the index saw it
   * is left out of the page. BadCursor for a cursor this index did not make; BadSearch for too many words.
   */
  async search(query: SearchQuery, get: (aid: string) => Promise<AgentRecord | undefined>): Promise<SearchPage> {
    const after = query.cursor === null ? null : decodeCursor(query.cursor);
    const page = query.words.length === 0 ? this.list(query, after) : this.find(query, after);
    const records = await Promise.all(page.hits.map((aid) => get(aid)));
    return { agents: records.filter((r): r is AgentRecord => r !== undefined && r.card !== null), next: page.next };
  }

  /** A page of AIDs in relevance order: every query word must match. */
  private find(query: SearchQuery, after: Position | null): { hits: string[]; next: string | null } {
    const words = queryWords(query.words);
    if (!words) return { hits: [], next: null };
    const results = this.mini.search(
      { combineWith: 'AND', queries: words.map((w) => ({ combineWith: 'OR', queries: w.forms })) },
      { prefix: true, filter: (r) => this.passes(r.id as string, query) },
    );
    const ranked: Position[] = [];
    for (const r of results) {
      const p = { score: scoreOf(words, r.match), aid: r.id as string };
      if (!after || compare(p, after) > 0) ranked.push(p);
    }
    return pageOf(top(ranked, query.limit + 1), query.limit);
  }

  /** A page of AIDs in AID order, for a search without words (filters still apply). */
  private list(query: SearchQuery, after: Position | null): { hits: string[]; next: string | null } {
    const start = after ? after.aid : null;
    const candidates = this.filterSet(query);
    const pool = candidates && candidates.size <= SORT_AT_MOST ? [...candidates].sort() : this.sorted;
    const from = start === null ? 0 : upper(pool, start);
    const found: Position[] = [];
    for (let i = from; i < pool.length && found.length <= query.limit; i++) {
      const aid = pool[i]!;
      if (this.passes(aid, query)) found.push({ score: 0, aid });
    }
    return pageOf(found, query.limit);
  }

  private passes(aid: string, query: SearchQuery): boolean {
    const e = this.entries.get(aid);
    if (!e) return false;
    if (query.skill !== null && !e.skills.includes(query.skill)) return false;
    if (query.tag !== null && !e.tags.includes(query.tag)) return false;
    return true;
  }

  /** The smaller of the filters' agent sets, or null without a filter. */
  private filterSet(query: SearchQuery): Set<string> | null {
    const sets: Set<string>[] = [];
    if (query.skill !== null) sets.push(this.bySkill.get(query.skill) ?? new Set());
    if (query.tag !== null) sets.push(this.byTag.get(query.tag) ?? new Set());
    if (sets.length === 0) return null;
    return sets.reduce((x, y) => (y.size < x.size ? y : x));
  }

  private refilter(aid: string, fields: AgentFields): void {
    for (const skill of fields.skills) addTo(this.bySkill, skill, aid);
    for (const tag of fields.tags) addTo(this.byTag, tag, aid);
  }

  private unfilter(aid: string): void {
    const e = this.entries.get(aid);
    if (!e) return;
    for (const skill of e.skills) deleteFrom(this.bySkill, skill, aid);
    for (const tag of e.tags) deleteFrom(this.byTag, tag, aid);
  }

  /** Where `aid` is or would go in `sorted`. */
  private place(aid: string): number {
    return lower(this.sorted, aid);
  }
}

/** The score of one result: per query word, the best place one of its matched field words is. */
function scoreOf(words: QueryWord[], match: Record<string, string[]>): number {
  let total = 0;
  for (const word of words) {
    let best = 0;
    for (const [term, fields] of Object.entries(match)) {
      const how = matchOf(word, term);
      if (!how) continue;
      for (const f of fields) best = Math.max(best, SCORE[f as Weight][how]);
    }
    total += best;
  }
  return total;
}

/** The first `n` positions in result order (a full sort only of what could be on the page). */
function top(positions: Position[], n: number): Position[] {
  if (positions.length <= n * 8) return positions.sort(compare).slice(0, n);
  // Many matches: the n-th best score bounds the page; sort only the candidates at or above it.
  const scores = positions.map((p) => p.score).sort((x, y) => y - x);
  const bound = scores[n - 1]!;
  return positions
    .filter((p) => p.score >= bound)
    .sort(compare)
    .slice(0, n);
}

/** `found` holds up to limit+1 positions in order: the page, and whether another follows. */
function pageOf(found: Position[], limit: number): { hits: string[]; next: string | null } {
  const page = found.slice(0, limit);
  const next = found.length > limit ? encodeCursor(page[page.length - 1]!) : null;
  return { hits: page.map((p) => p.aid), next };
}

/** First index whose value is >= `key` in a sorted array. */
function lower(sorted: string[], key: string): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** First index whose value is > `key`. */
function upper(sorted: string[], key: string): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! <= key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function addTo(map: Map<string, Set<string>>, key: string, aid: string): void {
  const set = map.get(key);
  if (set) set.add(aid);
  else map.set(key, new Set([aid]));
}

function deleteFrom(map: Map<string, Set<string>>, key: string, aid: string): void {
  const set = map.get(key);
  if (!set) return;
  set.delete(aid);
  if (set.size === 0) map.delete(key);
}
