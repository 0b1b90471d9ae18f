// The card history store (SPEC §14 audit): every card version published or seen, with when and where.
import type { Store } from '../../store/db.js';
import { seqKey } from '../../store/db.js';

export interface CardSeen {
  aid: string;
  seq: string;
  digest: string;
  wire: string;
  /** `self` for our own cards, else where it came from (`hub <url>`, `peer`). */
  source: string;
  obtainedAt: number;
}

export async function recordCard(store: Store, seen: CardSeen): Promise<void> {
  const key = `${seen.aid}!${seqKey(Number(seen.seq))}!${seen.digest}`;
  // The first time a version was obtained is what an audit wants; later sightings do not overwrite it.
  if ((await store.cards.get(key)) === undefined) await store.cards.put(key, seen);
}

export async function cardHistory(store: Store, aid?: string): Promise<CardSeen[]> {
  const range = aid ? { gt: `${aid}!`, lt: `${aid}!~` } : {};
  return (await store.cards.values(range).all()) as CardSeen[];
}
