// `anet audit` (SPEC §14): which card and which price a peer signed when. `cards` lists every card
// version this node published or saw (the `cards` history), re-verifying each signature now against the
// KEL we hold — a card signed by a key since rotated away is reported as such, not as a forgery.
// `prices` shows each skill's price across the extended cards a provider signed for us, and the signed
// card version each of our payments to it was checked against.
import type { Node } from './node.js';
import { cardHistory, type CardSeen } from '../card/history.js';
import { verifyCard } from '../protocol/card/verify.js';
import { pricesOf, type Price } from '../card/extended.js';
import { validateKel, type KelState } from '../identity/kel.js';
import type { AgentCard } from '../protocol/card/types.js';
import { EXT_CARD } from '../protocol/card/constants.js';
import type { TaskRecord } from './caller/records.js';

export interface CardAuditRow {
  aid: string;
  seq: string;
  kind: 'public' | 'extended';
  issuedAt: number | null;
  obtainedAt: number;
  source: string;
  digest: string;
  skills: string[];
  prices: Price[] | null;
  /** `ok`, `ok, signed with key #N (since rotated)`, or the WIRE §3.4 code it fails with now. */
  check: string;
}

export interface PriceHistory {
  skillId: string;
  versions: { amount: string; seq: string; digest: string; obtainedAt: number; source: string }[];
}

export interface PaymentAuditRow {
  task: string;
  skillId: string;
  amount: string;
  at: number;
  auto: boolean | null;
  status: string;
  hubTx: string | null;
  /** The signed price the quote was checked against, and the card version that signed it. */
  price: { amount: string; seq: string; digest: string } | null;
}

export interface PriceAudit {
  aid: string;
  skills: PriceHistory[];
  payments: PaymentAuditRow[];
}

const isExtended = (seen: CardSeen) => seen.source.includes('extended');

export async function auditCards(node: Node, aid?: string): Promise<CardAuditRow[]> {
  const rows: CardAuditRow[] = [];
  const kels = new Map<string, KelState | null>();
  for (const seen of await cardHistory(node.store, aid)) {
    if (!kels.has(seen.aid))
      kels.set(seen.aid, seen.aid === node.identity.aid ? node.identity.kel : await node.reader.kel(seen.aid).catch(() => null));
    rows.push(auditRow(seen, kels.get(seen.aid)!, node.now()));
  }
  return rows.sort((a, b) => a.obtainedAt - b.obtainedAt);
}

function auditRow(seen: CardSeen, kel: KelState | null, now: number): CardAuditRow {
  let card: AgentCard | null = null;
  try {
    card = JSON.parse(seen.wire) as AgentCard;
  } catch {
    card = null;
  }
  const issued = card?.capabilities?.extensions?.find((e) => e.uri === EXT_CARD)?.params?.issuedAt;
  const prices = isExtended(seen) && card ? pricesOf(card) : null;
  return {
    aid: seen.aid,
    seq: seen.seq,
    kind: isExtended(seen) ? 'extended' : 'public',
    issuedAt: typeof issued === 'string' ? Number(issued) : null,
    obtainedAt: seen.obtainedAt,
    source: seen.source,
    digest: seen.digest,
    skills: card?.skills?.map((s) => s.id) ?? [],
    prices: prices && !('error' in prices) ? prices.prices : null,
    check: checkNow(seen.wire, kel, now),
  };
}

/** Verifies under the KEL we hold; a card signed by an earlier establishment key is checked at that key. */
function checkNow(wire: string, kel: KelState | null, now: number): string {
  const r = verifyCard(wire, { kel, now });
  if (r.ok) return 'ok';
  if (r.code !== 'KEY_NOT_CURRENT' || !kel) return r.code;
  for (let ksn = kel.events.length - 2; ksn >= 0; ksn--) {
    const then = verifyCard(wire, { kel: validateKel(kel.events.slice(0, ksn + 1)), now });
    if (then.ok) return `ok, signed with key #${ksn} (since rotated)`;
  }
  return r.code;
}

export async function auditPrices(node: Node, aid: string): Promise<PriceAudit> {
  const skills = new Map<string, PriceHistory>();
  for (const row of (await auditCards(node, aid)).filter((r) => r.kind === 'extended' && r.check.startsWith('ok'))) {
    for (const p of row.prices ?? []) {
      const h = skills.get(p.skillId) ?? { skillId: p.skillId, versions: [] };
      h.versions.push({ amount: p.amount, seq: row.seq, digest: row.digest, obtainedAt: row.obtainedAt, source: row.source });
      skills.set(p.skillId, h);
    }
  }
  const payments = (await node.caller.tasks()).filter((t) => t.to === aid && t.payment?.quote).map(paymentRow);
  return { aid, skills: [...skills.values()].sort((a, b) => (a.skillId < b.skillId ? -1 : 1)), payments };
}

function paymentRow(t: TaskRecord): PaymentAuditRow {
  const p = t.payment!;
  return {
    task: t.task,
    skillId: p.skillId,
    amount: p.quote!.amount,
    at: p.authorizedAt ?? p.receivedAt,
    auto: p.auto,
    status: p.status,
    hubTx: p.hubTx,
    price: p.price ? { amount: p.price.amount, seq: p.price.seq, digest: p.price.digest } : null,
  };
}
