// Publishing our public card (SPEC §5.1): build it from config + profile; the same content keeps its
// signed bytes, new content gets the next seq (persisted before it is sent); no card means withdrawal.
// "Content" includes what the extended cards add (prices, allow_only skills), as a digest kept here only:
// a provider's price list changes only with a new seq, so two price lists never share one.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Config } from '../config/schema.js';
import type { Identity } from '../identity/store.js';
import type { Store } from '../../store/db.js';
import { buildPublicCard, cardContentKey, type Profile } from './build.js';
import { signCard } from '../protocol/card/jws.js';
import { extendedContentDigest } from './extended.js';
import { verifyCard } from '../protocol/card/verify.js';
import { recordCard } from './history.js';
import type { HubClient } from '../hub-client/client.js';
import { writeFileAtomic, isNotFound } from '../util/fsutil.js';

export interface OwnCard {
  seq: string;
  contentKey: string | null;
  /** The signed card, or null when the node publishes none. */
  wire: string | null;
  ksn: number;
}

export const profilePath = (dataDir: string) => join(dataDir, 'profile.json');

export async function readProfile(dataDir: string): Promise<Profile> {
  try {
    const p = JSON.parse(await readFile(profilePath(dataDir), 'utf8'));
    return {
      ...(typeof p.name === 'string' ? { name: p.name } : {}),
      ...(typeof p.description === 'string' ? { description: p.description } : {}),
    };
  } catch (err) {
    if (isNotFound(err)) return {};
    throw new Error(`${profilePath(dataDir)} is not valid JSON: fix or remove it`);
  }
}

export async function writeProfile(dataDir: string, profile: Profile): Promise<void> {
  await writeFileAtomic(profilePath(dataDir), `${JSON.stringify(profile, null, 2)}\n`, 0o600);
}

/** Our current card: re-signed with a higher seq only when its content or signing key changed. */
export async function currentCard(store: Store, config: Config, profile: Profile, identity: Identity, now: number): Promise<OwnCard> {
  const prev = (await store.meta.get('card')) as OwnCard | undefined;
  const prevSeq = BigInt(prev?.seq ?? '0');
  const draft = buildPublicCard(config, profile, identity.aid, { seq: prevSeq, issuedAt: now, notBefore: now });
  // A new price or hidden skill changes the key too, though not the public card's content (SPEC §5.1).
  const contentKey = draft ? `${cardContentKey(draft)}\n${extendedContentDigest(config, profile, identity.aid)}` : null;
  if (prev && prev.contentKey === contentKey && prev.ksn === identity.kel.ksn) return prev;
  if (!draft) {
    const none: OwnCard = { seq: prevSeq.toString(), contentKey: null, wire: null, ksn: identity.kel.ksn };
    await store.meta.put('card', none);
    return none;
  }
  const seq = prevSeq + 1n;
  const card = buildPublicCard(config, profile, identity.aid, { seq, issuedAt: now, notBefore: now })!;
  const wire = JSON.stringify(signCard(card, identity.signer, config.hub, identity.aid, identity.kel.ksn));
  const check = verifyCard(wire, { kel: identity.kel, now });
  if (!check.ok) throw new Error(`our own card does not verify (${check.code}): ${check.detail}`);
  const own: OwnCard = { seq: seq.toString(), contentKey, wire, ksn: identity.kel.ksn };
  await store.meta.put('card', own);
  await recordCard(store, { aid: identity.aid, seq: own.seq, digest: check.digest, wire, source: 'self', obtainedAt: now });
  return own;
}

/** Registers with the hub (KEL, name, card) or withdraws when there is no card. */
export async function publishToHub(client: HubClient, own: OwnCard, name: string): Promise<'published' | 'withdrawn'> {
  await client.register(name, own.wire);
  if (own.wire) return 'published';
  await client.withdraw();
  return 'withdrawn';
}
