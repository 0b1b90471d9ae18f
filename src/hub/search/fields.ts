// The directory's ranking rules (SPEC §11, issue 19), in one place: both backends (the in-process index in
// ./index.ts, PostgreSQL in ./postgres.ts) take their words, weights, scores and cursors from here, so the
// same query over the same agents gives the same pages in the same order on either.
//
// Fields, by weight: A — the registered name, the card's name, every skill id; B — skill names and tags;
// C — the card's and the skills' descriptions. Each text is cut into words (runs of letters and digits),
// lowercased, and each word is kept both as written and as its Porter stem (`stemmer`), so `translate` and
// `translator` meet on `translat`, and a prefix the stemmer would change (`translati`) still finds
// `translation` through the word as written.
//
// A query: every word must match (AND); a query word matches a field word that it equals or begins
// (`transl` finds `translator`; words under three letters match whole words only), in its written or
// stemmed form. Each query word scores by the best weight it matched under: A 4, B 2, C 1; an agent's score
// is the sum over the query words. How often a word occurs does not count, so an agent named "translator"
// outranks any number of mentions in a description. Order: score descending, then AID ascending (code-unit
// order, as LevelDB keys and PostgreSQL's "C" collation sort), a total order, so pages neither repeat nor
// skip. Exact and prefix matches score alike on purpose: the score then depends only on which weight each
// word reached, so every agent of one such combination has the same score and they come in AID order,
// which PostgreSQL reads on its primary key without scoring every match of a common word (that cost
// 150+ ms at 100k agents).
import { createHash } from 'node:crypto';
import { stemmer } from 'stemmer';
import type { AgentCard } from '../../protocol/card/types.js';
import type { AgentRecord } from '../storage/types.js';

export type Weight = 'A' | 'B' | 'C';
export const WEIGHTS: readonly Weight[] = ['A', 'B', 'C'];

/** What a word scores by the best weight it matched under. */
export const SCORE: Record<Weight, number> = { A: 4, B: 2, C: 1 };

/** A query of more words than this is refused: each word costs every candidate a few index probes. */
export const MAX_WORDS = 16;

/** Longer words are not indexed (nobody searches for them; PostgreSQL caps a lexeme at 2 KiB). */
const MAX_WORD = 64;

/**
 * Shorter query words match whole words only: a prefix of one or two letters would expand to a good part of
 * the vocabulary and cost a search every posting of it.
 */
export const MIN_PREFIX = 3;

/** A search the hub refuses to run (the HTTP layer answers 400). */
export class BadSearch extends Error {
  override name = 'BadSearch';
}

/** A `cursor` that is not the `next` of a page of this hub. */
export class BadCursor extends BadSearch {
  override name = 'BadCursor';
  constructor() {
    super('cursor is not the `next` of a directory page: start again without a cursor');
  }
}

/** The searchable parts of an agent with a card. */
export interface AgentFields {
  /** Distinct words (written and stemmed) per weight; a word may appear under several weights. */
  words: Record<Weight, string[]>;
  /** Skill ids and tags, exactly as in the card, for the `skill` and `tag` filters. */
  skills: string[];
  tags: string[];
}

/** One query word: its forms (as written and its stem; one form when they are equal). */
export interface QueryWord {
  forms: string[];
}

/** The words of a text: lowercased runs of letters and digits, over-long ones dropped. */
export function split(text: string): string[] {
  return text
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)
    .filter((w) => w.length > 0 && w.length <= MAX_WORD);
}

/** Stems already computed: stemming costs microseconds a word, and cards repeat their vocabulary. */
const stems = new Map<string, string>();
const STEMS_KEPT = 200_000;

/** The Porter stem of a lowercased word. */
export function stem(word: string): string {
  let s = stems.get(word);
  if (s === undefined) {
    if (stems.size >= STEMS_KEPT) stems.clear();
    s = stemmer(word);
    stems.set(word, s);
  }
  return s;
}

/** Every word of `texts`, as written and stemmed, without repeats. */
export function lexemes(texts: string[]): string[] {
  const out = new Set<string>();
  for (const text of texts) {
    for (const word of split(text)) {
      out.add(word);
      out.add(stem(word));
    }
  }
  return [...out];
}

/** Skill ids are often one camelCase or kebab word (`translateText`, `translate-text`): split both ways. */
function idText(id: string): string {
  return id.replace(/(\p{Ll})(\p{Lu})/gu, '$1 $2');
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const strs = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);

/** The card of a record, or null when withdrawn or not a JSON object (such a record is not listed). */
export function cardOf(rec: AgentRecord): Partial<AgentCard> | null {
  if (rec.card === null) return null;
  try {
    const card = JSON.parse(rec.card) as unknown;
    return card !== null && typeof card === 'object' && !Array.isArray(card) ? (card as Partial<AgentCard>) : null;
  } catch {
    return null;
  }
}

/** The weighted fields of an agent, or null when it has no card to list. */
export function agentFields(rec: AgentRecord): AgentFields | null {
  const card = cardOf(rec);
  if (!card) return null;
  const skills = Array.isArray(card.skills) ? card.skills.filter((s) => s !== null && typeof s === 'object') : [];
  const ids = skills.map((s) => str(s.id));
  const a = [rec.name, str(card.name), ...ids.map(idText)];
  const b = skills.flatMap((s) => [str(s.name), ...strs(s.tags)]);
  const c = [str(card.description), ...skills.map((s) => str(s.description))];
  return {
    words: { A: lexemes(a), B: lexemes(b), C: lexemes(c) },
    skills: [...new Set(ids.filter((id) => id !== ''))],
    tags: [...new Set(skills.flatMap((s) => strs(s.tags)))],
  };
}

/**
 * The query's words, each with its forms. A query word with several parts (`translate-text`) is several
 * words. null: some word has no letter or digit, so nothing can match it. Too many words: BadSearch.
 */
export function queryWords(words: string[]): QueryWord[] | null {
  const out: QueryWord[] = [];
  for (const word of words) {
    const parts = split(word);
    if (parts.length === 0) return null;
    for (const part of parts) out.push({ forms: [...new Set([part, stem(part)])] });
  }
  if (out.length > MAX_WORDS) throw new BadSearch(`a search takes at most ${MAX_WORDS} words, not ${out.length}`);
  return out;
}

/** Whether a query word's form also matches as a prefix. */
export const prefixes = (form: string): boolean => form.length >= MIN_PREFIX;

/** What a word scores matching a field word present under the weights `bits` (A 1, B 2, C 4). */
export function levelOf(bits: number): number {
  return bits & 1 ? SCORE.A : bits & 2 ? SCORE.B : SCORE.C;
}

export const BIT: Record<Weight, number> = { A: 1, B: 2, C: 4 };

/** A stable label for a skill id or tag in an index (PostgreSQL keeps it as a lexeme no query word can reach). */
export function filterKey(kind: 'skill' | 'tag', value: string): string {
  return `~${kind === 'skill' ? 's' : 't'}${createHash('sha256').update(value).digest('base64url')}`;
}

// ---- Cursors: where a page ended, as (score, aid); the next page starts strictly after it ----

export interface Position {
  score: number;
  aid: string;
}

/** Compares two positions in result order: negative when `x` comes first. */
export function compare(x: Position, y: Position): number {
  if (x.score !== y.score) return y.score - x.score;
  return x.aid < y.aid ? -1 : x.aid > y.aid ? 1 : 0;
}

export function encodeCursor(p: Position): string {
  return Buffer.from(`${p.score}:${p.aid}`).toString('base64url');
}

/** The position a cursor names; BadCursor when it is not one this hub made. */
export function decodeCursor(cursor: string): Position {
  if (!/^[A-Za-z0-9_-]{1,700}$/.test(cursor)) throw new BadCursor();
  const m = /^(\d{1,4}):([\x21-\x7e]{1,500})$/.exec(Buffer.from(cursor, 'base64url').toString('latin1'));
  if (!m) throw new BadCursor();
  return { score: Number(m[1]), aid: m[2]! };
}
