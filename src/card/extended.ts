// Extended cards (SPEC §5.3–5.4): `general` (the public card plus the prices of its priced skills, for any
// caller) and `list` (plus the allow_only capabilities as skills and all their prices, for allow/trust
// peers); `not_configured` when the kind meant for the caller adds nothing to the public card.
import type { Config } from '../config/schema.js';
import { offeredCapabilities, type OfferedCapability } from '../config/check.js';
import { buildPublicCard, skillOf, isPriced, byId, type Profile, type CardStamp } from './build.js';
import { EXT_PRICE } from '../protocol/card/constants.js';
import { MAX_CREDITS } from '../config/schema.js';
import type { AgentCard } from '../protocol/card/types.js';
import canonicalize from 'canonicalize';
import { sha256 } from '@noble/hashes/sha2.js';

export type ExtendedKind = 'general' | 'list';

export interface Price {
  skillId: string;
  amount: string;
}

export function buildExtendedCard(
  config: Config,
  profile: Profile,
  aid: string,
  stamp: CardStamp,
  kind: ExtendedKind,
  hubAid: string,
): AgentCard | 'not_configured' {
  const base = buildPublicCard(config, profile, aid, stamp);
  const offered = offeredCapabilities(config);
  const hidden = kind === 'list' ? offered.filter((c) => c.inbound.allow_only).sort(byId) : [];
  const visible = offered.filter((c) => !c.inbound.allow_only);
  const priced: OfferedCapability[] = [...visible, ...hidden].filter(isPriced).sort(byId);
  // An extended card extends a public card (same aid and seq); with no public card there is none.
  if (!base || (priced.length === 0 && hidden.length === 0)) return 'not_configured';
  const card = base;
  const skills = [...card.skills, ...hidden.map(skillOf)].sort(byId);
  const prices: Price[] = priced.map((c) => ({ skillId: c.id, amount: c.service.price!.toString() }));
  return {
    ...card,
    skills,
    capabilities: {
      ...card.capabilities,
      extensions: [
        ...card.capabilities.extensions,
        {
          uri: EXT_PRICE,
          description: 'Prices of the priced skills, in credits of the named hub ledger; skills not listed are free.',
          required: false,
          params: { network: `hub:${hubAid}`, asset: 'credit', prices },
        },
      ],
    },
  };
}

/**
 * A digest of everything the extended cards add to the public card (prices, allow_only skills), for the
 * content key alone: never published, so the public card still shows no price, yet a changed price list
 * is a new card version with a new seq, and every reader's cached extended card goes stale (SPEC §5.1,
 * §6.2). The `list` card holds all that the `general` one does; the hub's AID (the prices' network) is
 * left out, as the hub's URL is already in the public card.
 */
export function extendedContentDigest(config: Config, profile: Profile, aid: string): string {
  const card = buildExtendedCard(config, profile, aid, { seq: 0n, issuedAt: 0, notBefore: 0 }, 'list', '');
  if (card === 'not_configured') return 'none';
  return Buffer.from(sha256(Buffer.from(canonicalize(card)!))).toString('hex');
}

const CANONICAL_AMOUNT = /^[1-9][0-9]*$/;

/** The prices of an extended card, strictly: canonical decimals 1..2^63−1, sorted, unique. */
export function pricesOf(card: AgentCard): { network: string; asset: string; prices: Price[] } | { error: string } {
  const ext = card.capabilities?.extensions?.find((e) => e.uri === EXT_PRICE);
  if (!ext) return { network: '', asset: '', prices: [] };
  const p = ext.params as { network?: unknown; asset?: unknown; prices?: unknown } | undefined;
  if (!p || typeof p.network !== 'string' || !p.network.startsWith('hub:') || p.asset !== 'credit' || !Array.isArray(p.prices)) {
    return { error: 'the anet-price extension needs network "hub:<aid>", asset "credit" and a prices list' };
  }
  const prices: Price[] = [];
  for (const item of p.prices as { skillId?: unknown; amount?: unknown }[]) {
    if (
      typeof item?.skillId !== 'string' ||
      typeof item.amount !== 'string' ||
      !CANONICAL_AMOUNT.test(item.amount) ||
      BigInt(item.amount) > MAX_CREDITS
    ) {
      return { error: `price ${JSON.stringify(item)} is not a canonical amount from 1 to 2^63-1` };
    }
    const last = prices[prices.length - 1];
    if (last && last.skillId >= item.skillId) return { error: 'prices must be sorted by skillId, each once' };
    prices.push({ skillId: item.skillId, amount: item.amount });
  }
  return { network: p.network, asset: 'credit', prices };
}
