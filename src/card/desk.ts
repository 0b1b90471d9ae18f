// The provider's side of `card.request` (SPEC §5.3, §6.2, §7): at most 6 answers per sender per 60 s (the
// reply-limiter machine; past it, no answer at all), the `list` card for peers on the allow or trust
// list and the `general` card for anyone else (`not_configured` when it would add nothing), signed like
// the public card it extends, with a fresh contact credential for listed peers.
import { replyLimiter } from '../actors/reply-limiter.js';
import type { MessageHandler, Messenger } from '../relay/messenger.js';
import { fromBody, toBody } from '../protocol/body.js';
import { standing } from '../contacts/lists.js';
import { issueAndRecord, issueCredential, recordIssued, signedByOldKey } from '../contacts/credential.js';
import { MAX_MESSAGE_TTL_MS } from '../protocol/envelope.js';
import { buildExtendedCard, type ExtendedKind } from './extended.js';
import { readProfile, type OwnCard } from './publish.js';
import { signCard } from '../protocol/card/jws.js';
import { EXT_CARD } from '../protocol/card/constants.js';
import type { AgentCard } from '../protocol/card/types.js';
import type { CardStamp } from './build.js';
import type { CborValue } from '../identity/cbor.js';
import type { Config } from '../config/schema.js';
import type { Identity } from '../identity/store.js';
import type { Store } from '../../store/db.js';
import type { ActorHost } from '../runtime/host.js';
import { CARD_REPLY, CONTACT_CREDENTIAL } from '../protocol/messages.js';

/** A card request or reply older than this is useless: the reader waits 10 s. */
export const CARD_MESSAGE_TTL_MS = 30_000;

/** What the card desk uses of its node: it answers card requests and renews contact credentials. */
export interface DeskParts {
  dataDir: string;
  config: Config;
  identity: Identity;
  store: Store;
  host: ActorHost;
  messenger: Messenger;
  /** The hub's AID (prices name its ledger). */
  hubAid: () => Promise<string>;
  now: () => number;
}

/** The stamp (seq, issue time) of the public card we publish now, from its signed bytes. */
function stampOf(own: OwnCard | undefined): CardStamp | null {
  if (!own?.wire) return null;
  const card = JSON.parse(own.wire) as AgentCard;
  const p = card.capabilities.extensions.find((e) => e.uri === EXT_CARD)?.params as { seq: string; issuedAt: string; notBefore: string };
  return { seq: BigInt(p.seq), issuedAt: Number(p.issuedAt), notBefore: Number(p.notBefore) };
}

/** The body of our answer to `from`: the signed card or not_configured, and a credential if listed. */
export async function cardReplyBody(
  parts: Omit<DeskParts, 'host' | 'messenger'>,
  from: string,
  rid: string,
): Promise<Map<string, CborValue>> {
  const who = await standing(parts.dataDir, parts.config, from);
  const listed = who === 'allowed' || who === 'trusted';
  const kind: ExtendedKind = listed ? 'list' : 'general';
  const stamp = stampOf((await parts.store.meta.get('card')) as OwnCard | undefined);
  const card = stamp
    ? buildExtendedCard(parts.config, await readProfile(parts.dataDir), parts.identity.aid, stamp, kind, await parts.hubAid())
    : 'not_configured';
  const { identity } = parts;
  const wire =
    card === 'not_configured'
      ? undefined
      : JSON.stringify(signCard(card, identity.signer, parts.config.hub, identity.aid, identity.kel.ksn));
  return toBody({
    rid,
    ...(wire ? { card: wire } : { not_configured: true }),
    credential: listed ? await issueAndRecord(parts.store, identity, from, parts.now()) : undefined,
  });
}

export function cardDesk(parts: DeskParts): MessageHandler {
  return async (m) => {
    const body = fromBody(m.body);
    const rid = body?.rid;
    if (typeof rid !== 'string' || rid.length > 64) return;
    // Past 6 requests in 60 s the sender gets no answer at all (SPEC §6.2).
    if (!(await replyLimiter(parts.host, m.from).admit(m.at))) return;
    await parts.messenger.send(m.from, CARD_REPLY, await cardReplyBody(parts, m.from, rid), { ix: m.ix + 1, ttlMs: CARD_MESSAGE_TTL_MS });
  };
}

/**
 * After a key rotation, sends each peer still on our lists a credential signed with the new key; peers
 * since removed get none (and their record is dropped). Returns how many were renewed.
 */
export async function renewCredentials(parts: Omit<DeskParts, 'host'>): Promise<number> {
  let renewed = 0;
  for (const sub of await signedByOldKey(parts.store, parts.identity, parts.now())) {
    const who = await standing(parts.dataDir, parts.config, sub);
    if (who !== 'allowed' && who !== 'trusted') {
      await parts.store.issued.del(sub);
      continue;
    }
    const now = parts.now();
    const credential = issueCredential(parts.identity, sub, now);
    try {
      // As long as the hub queues for an offline peer; recorded only once the hub has it, so a failed
      // renewal is tried again at the next start.
      await parts.messenger.send(sub, CONTACT_CREDENTIAL, toBody({ credential }), { ttlMs: MAX_MESSAGE_TTL_MS - 60_000 });
    } catch {
      continue;
    }
    await recordIssued(parts.store, parts.identity, sub, now);
    renewed++;
  }
  return renewed;
}
