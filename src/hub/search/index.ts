// The embedded backend's directory index (SPEC §11, issue 19): an in-process inverted index over every agent
// with a card, kept by the LevelDB store: built from all records at start, then `set` on every write. Its
// term dictionary is minisearch's radix tree (`SearchableMap`), which walks every word with a prefix; each
// word's postings say which agents have it under which weights (A, B, C). A search fills each query word's
// best level per agent from its postings, keeps the agents every word reached, and scores them by the shared
// rules of ./fields.ts, so this index and PostgreSQL rank alike. (minisearch's own MiniSearch class was
// tried first: it computes BM25 and a result object for every match, 100-250 ms for a common word at 10k
// agents, and 7 KiB of heap per agent.) The filters (skill id, tag) are answered from what the index keeps
// per agent: no record is read until the page is known.
import SearchableMap from 'minisearch/SearchableMap';
import type { AgentRecord, SearchPage, SearchQuery } from '../storage/types.js';
import {
  agentFields,
  BIT,
  compare,
  decodeCursor,
  encodeCursor,
  levelOf,
  type Position,
  prefixes,
  type QueryWord,
  queryWords,
  WEIGHTS,
} from './fields.js';

export { BadCursor, BadSearch } from './fields.js';

/** What the index keeps per agent beside its postings: its document number and the filters' values. */
interface Entry {
  doc: number;
  /** How many postings its document added (they stay, dead, until compacted once it is replaced). */
  postings: number;
  skills: string[];
  tags: string[];
}

/** A posting: document number * 8 + the weights (A 1, B 2, C 4) the word has in that document. */
const SHIFT = 3;

/** A filter-only search sorts the filter's agents when there are at most this many, else walks all in order. */
const SORT_AT_MOST = 5000;

/**
 * Postings of replaced or removed agents are dropped once their documents are this many and half of all
 * documents, or once the dead postings themselves are this many and half of all postings: one agent that
 * republishes a large card over and over must not grow the index without bound.
 */
const COMPACT_AT = 1000;
const COMPACT_POSTINGS_AT = 100_000;

export class DirectoryIndex {
  /** Word → postings; the radix tree holds the same words, only to walk those with a prefix (its lookups are slower). */
  private readonly terms = new Map<string, number[]>();
  private readonly tree = new SearchableMap<true>();
  /** Document number → AID, null once replaced or removed (its postings are dropped later, in bulk). */
  private docs: (string | null)[] = [];
  private dead = 0;
  private deadPostings = 0;
  private postings = 0;
  private readonly entries = new Map<string, Entry>();
  /** The AIDs with a card, in AID order (the order of a search without words). */
  private readonly sorted: string[] = [];
  private readonly bySkill = new Map<string, Set<string>>();
  private readonly byTag = new Map<string, Set<string>>();

  /** Agents listed. */
  get size(): number {
    return this.entries.size;
  }

  /** What the index holds: documents (dead ones included until compacted), postings, distinct words. */
  get held(): { docs: number; postings: number; words: number } {
    return { docs: this.docs.length, postings: this.postings, words: this.terms.size };
  }

  /** Adds or replaces an agent; one without a card (withdrawn, or not JSON) is removed. */
  set(rec: AgentRecord): void {
    const fields = agentFields(rec);
    if (!fields) {
      this.remove(rec.aid);
      return;
    }
    const old = this.entries.get(rec.aid);
    if (old) this.drop(rec.aid, old);
    else if (this.sorted.length === 0 || this.sorted[this.sorted.length - 1]! < rec.aid) this.sorted.push(rec.aid);
    else this.sorted.splice(lower(this.sorted, rec.aid), 0, rec.aid);
    const doc = this.docs.length;
    this.docs.push(rec.aid);
    let added = 0;
    for (const [word, bits] of weightsOf(fields.words)) {
      added++;
      const list = this.terms.get(word);
      if (list) list.push((doc << SHIFT) | bits);
      else {
        this.terms.set(word, [(doc << SHIFT) | bits]);
        this.tree.set(word, true);
      }
    }
    this.postings += added;
    this.entries.set(rec.aid, { doc, postings: added, skills: fields.skills, tags: fields.tags });
    for (const skill of fields.skills) addTo(this.bySkill, skill, rec.aid);
    for (const tag of fields.tags) addTo(this.byTag, tag, rec.aid);
    this.compactIfDue();
  }

  remove(aid: string): void {
    const e = this.entries.get(aid);
    if (!e) return;
    this.drop(aid, e);
    this.entries.delete(aid);
    this.sorted.splice(lower(this.sorted, aid), 1);
    this.compactIfDue();
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
    const level = new Uint8Array(this.docs.length);
    const score = new Uint8Array(this.docs.length);
    let candidates: number[] | null = null;
    for (const word of words) {
      level.fill(0);
      this.fill(word, level);
      candidates = candidates === null ? reached(level) : candidates.filter((d) => level[d]! > 0);
      for (const d of candidates) score[d]! += level[d]!;
      if (candidates.length === 0) break;
    }
    const filtered =
      query.skill === null && query.tag === null ? (candidates ?? []) : (candidates ?? []).filter((d) => this.passes(this.docs[d]!, query));
    const rest = after === null ? filtered : filtered.filter((d) => compare({ score: score[d]!, aid: this.docs[d]! }, after) > 0);
    return pageOf(this.top(rest, score, query.limit + 1), query.limit);
  }

  /**
   * The first `n` documents in result order, without sorting every match: the scores above the n-th best
   * are few; within the score that cuts the page, only the smallest AIDs are kept.
   */
  private top(docs: number[], score: Uint8Array, n: number): Position[] {
    const counts = new Uint32Array(256);
    for (const d of docs) counts[score[d]!]!++;
    let bound = 0;
    let above = 0;
    for (let s = 255; s > 0; s--) {
      if (counts[s] === 0) continue;
      bound = s;
      if (above + counts[s]! >= n) break;
      above += counts[s]!;
    }
    const high: Position[] = [];
    const cut: Position[] = [];
    for (const d of docs) {
      const s = score[d]!;
      if (s > bound) high.push({ score: s, aid: this.docs[d]! });
      else if (s === bound) cut.push({ score: s, aid: this.docs[d]! });
    }
    return [...high.sort(compare), ...smallest(cut, n - high.length)];
  }

  /** Each live document's best level for one query word, over every indexed word it equals or begins. */
  private fill(word: QueryWord, level: Uint8Array): void {
    const seen = new Set<string>();
    for (const form of word.forms) {
      const found: [string, number[]][] = [];
      if (prefixes(form)) {
        for (const [term] of this.tree.atPrefix(form)) found.push([term, this.terms.get(term)!]);
      } else {
        const list = this.terms.get(form);
        if (list) found.push([form, list]);
      }
      for (const [term, list] of found) {
        if (seen.has(term)) continue;
        seen.add(term);
        for (const p of list) {
          const d = p >>> SHIFT;
          if (this.docs[d] === null) continue;
          const l = levelOf(p & 7);
          if (l > level[d]!) level[d] = l;
        }
      }
    }
  }

  /** A page of AIDs in AID order, for a search without words (filters still apply). */
  private list(query: SearchQuery, after: Position | null): { hits: string[]; next: string | null } {
    const candidates = this.filterSet(query);
    const pool = candidates && candidates.size <= SORT_AT_MOST ? [...candidates].sort() : this.sorted;
    const from = after === null ? 0 : upper(pool, after.aid);
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

  /** Forgets an agent's document (its postings stay until compacted) and its filter values. */
  private drop(aid: string, e: Entry): void {
    this.docs[e.doc] = null;
    this.dead++;
    this.deadPostings += e.postings;
    for (const skill of e.skills) deleteFrom(this.bySkill, skill, aid);
    for (const tag of e.tags) deleteFrom(this.byTag, tag, aid);
  }

  /** Renumbers the live documents and rewrites every posting list without the dead ones. */
  private compactIfDue(): void {
    const byDocs = this.dead >= COMPACT_AT && this.dead * 2 >= this.docs.length;
    const byPostings = this.deadPostings >= COMPACT_POSTINGS_AT && this.deadPostings * 2 >= this.postings;
    if (!byDocs && !byPostings) return;
    const renumber = new Int32Array(this.docs.length).fill(-1);
    const docs: string[] = [];
    this.docs.forEach((aid, d) => {
      if (aid === null) return;
      renumber[d] = docs.length;
      this.entries.get(aid)!.doc = docs.length;
      docs.push(aid);
    });
    const empty: string[] = [];
    for (const [term, list] of this.terms) {
      let n = 0;
      for (const p of list) {
        const d = renumber[p >>> SHIFT]!;
        if (d >= 0) list[n++] = (d << SHIFT) | (p & 7);
      }
      list.length = n;
      if (n === 0) empty.push(term);
    }
    for (const term of empty) {
      this.terms.delete(term);
      this.tree.delete(term);
    }
    this.docs = docs;
    this.dead = 0;
    this.postings -= this.deadPostings;
    this.deadPostings = 0;
  }
}

/** Each distinct word of an agent with the weights it has. */
function weightsOf(words: Record<'A' | 'B' | 'C', string[]>): Map<string, number> {
  const bits = new Map<string, number>();
  for (const w of WEIGHTS) for (const word of words[w]) bits.set(word, (bits.get(word) ?? 0) | BIT[w]);
  return bits;
}

/** The documents a query word reached. */
function reached(level: Uint8Array): number[] {
  const out: number[] = [];
  for (let d = 0; d < level.length; d++) if (level[d]! > 0) out.push(d);
  return out;
}

/** The `k` positions with the smallest AIDs, in order (one comparison for most of a long list). */
function smallest(positions: Position[], k: number): Position[] {
  const best: Position[] = [];
  for (const p of positions) {
    if (best.length === k && p.aid >= best[k - 1]!.aid) continue;
    best.splice(upperBy(best, p.aid), 0, p);
    if (best.length > k) best.pop();
  }
  return best;
}

function upperBy(best: Position[], aid: string): number {
  let lo = 0;
  let hi = best.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (best[mid]!.aid <= aid) lo = mid + 1;
    else hi = mid;
  }
  return lo;
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
