// Card verification (WIRE.md §3.4): every failure has exactly one code. Readers verify against the KEL,
// never against the hub; the key comes from the KEL at the kid's ksn, never from `jku`.
import { parse as parseLossless, isLosslessNumber } from 'lossless-json';
import canonicalize from 'canonicalize';
import { sha256 } from '@noble/hashes/sha2.js';
import { verify as verifyEd25519 } from '../../identity/ed25519.js';
import { isAid } from '../../identity/cid.js';
import type { KelState } from '../../identity/kel.js';
import { EXT_CARD, LIMITS, NOT_BEFORE_SKEW_MS } from './constants.js';
import { fromB64url, cardPayload } from './jws.js';
import { withoutDefaults } from './proto-defaults.js';
import type { AgentCard, CardIdentity } from './types.js';

export type CardErrorCode =
  | 'UNSIGNED'
  | 'MALFORMED_JSON'
  | 'INVALID_CARD'
  | 'BAD_SIGNATURE_HEADER'
  | 'BINDING_MISMATCH'
  | 'INVALID_SIGNATURE'
  | 'KEY_NOT_CURRENT'
  | 'KEL_UNAVAILABLE'
  | 'UNKNOWN_AID'
  | 'CARD_NOT_YET_VALID'
  | 'CARD_TOO_LARGE'
  | 'SEQ_ROLLBACK'
  | 'SEQ_FORK';

export interface VerifiedCard {
  ok: true;
  card: AgentCard;
  identity: CardIdentity;
  seq: bigint;
  ksn: number;
  /** sha2-256 of the signed payload: tells two cards of one seq apart (SEQ_FORK). */
  digest: string;
}

export type CardResult = VerifiedCard | { ok: false; code: CardErrorCode; detail: string };

/** The highest card seen for an AID, as a reader or hub keeps it. */
export interface HighWater {
  seq: bigint;
  digest: string;
}

export interface VerifyCardOptions {
  kel: KelState | null | 'invalid';
  now: number;
  highWater?: HighWater | null;
}

const MAX_U64 = (1n << 64n) - 1n;
const CANONICAL_DECIMAL = /^(0|[1-9][0-9]*)$/;
const fail = (code: CardErrorCode, detail: string): CardResult => ({ ok: false, code, detail });
const utf8Length = (s: string) => Buffer.byteLength(s, 'utf8');

function canonicalU64(v: unknown): bigint | null {
  if (typeof v !== 'string' || !CANONICAL_DECIMAL.test(v)) return null;
  const n = BigInt(v);
  return n <= MAX_U64 ? n : null;
}

function parseStrict(text: string): unknown {
  // lossless-json refuses duplicate members; numbers stay as LosslessNumber so they can be checked.
  return parseLossless(text);
}

export function verifyCard(wire: string, opts: VerifyCardOptions): CardResult {
  if (utf8Length(wire) > LIMITS.cardBytes) return fail('CARD_TOO_LARGE', `card is over ${LIMITS.cardBytes} bytes`);
  let raw: unknown;
  try {
    raw = parseStrict(wire);
  } catch (err) {
    return fail('MALFORMED_JSON', (err as Error).message);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return fail('INVALID_CARD', 'a card is a JSON object');
  const card = raw as Record<string, unknown>;
  const sigs = card.signatures;
  if (!Array.isArray(sigs) || sigs.length === 0) return fail('UNSIGNED', 'no signatures');
  const size = checkSizes(card, sigs);
  if (size) return size;
  const schema = checkSchema(card);
  if (typeof schema === 'string') return fail('INVALID_CARD', schema);
  const { identity, seq } = schema;
  const header = parseHeader(sigs[0]);
  if ('error' in header) return fail('BAD_SIGNATURE_HEADER', header.error);
  const tenant = (card.supportedInterfaces as { tenant?: unknown }[])[0]!.tenant;
  if (tenant !== identity.aid || header.aid !== identity.aid) return fail('BINDING_MISMATCH', 'tenant, kid AID and anet-card aid differ');
  if (opts.kel === null) return fail('KEL_UNAVAILABLE', 'no KEL for this AID');
  if (opts.kel === 'invalid' || opts.kel.aid !== identity.aid) return fail('UNKNOWN_AID', "the KEL is invalid or another AID's");
  if (header.ksn !== opts.kel.ksn) return fail('KEY_NOT_CURRENT', `signed with key #${header.ksn}; the current key is #${opts.kel.ksn}`);
  const plain = toPlain(card) as Record<string, unknown>;
  const signed = signedPayload(plain, header, opts.kel.currentKey);
  if (signed === null)
    return fail('INVALID_SIGNATURE', 'the signature does not verify over the card as received nor with its default-valued fields left out');
  if (BigInt(identity.notBefore) > BigInt(opts.now + NOT_BEFORE_SKEW_MS))
    return fail('CARD_NOT_YET_VALID', `notBefore ${identity.notBefore} is in the future`);
  const digest = Buffer.from(sha256(Buffer.from(signed))).toString('hex');
  if (opts.highWater) {
    if (seq < opts.highWater.seq) return fail('SEQ_ROLLBACK', `seq ${seq} is below ${opts.highWater.seq}, already seen`);
    if (seq === opts.highWater.seq && digest !== opts.highWater.digest) return fail('SEQ_FORK', `another card was seen with seq ${seq}`);
  }
  // What a reader acts on is what was signed: the form that verified, not the bytes as received.
  const signedCard = { ...(JSON.parse(signed) as Record<string, unknown>), signatures: plain.signatures } as unknown as AgentCard;
  return { ok: true, card: signedCard, identity, seq, ksn: header.ksn, digest };
}

/**
 * The payload the signature covers, or null: the JCS of the card as received (how ANet nodes sign), else
 * with default-valued fields left out as A2A §8.4.1 says, else with all of them left out (a2a-python).
 * Each form says the same thing (a default means absent), so accepting any of them changes no meaning.
 */
function signedPayload(
  plain: Record<string, unknown>,
  header: { protectedB64: string; signature: Uint8Array },
  key: Uint8Array,
): string | null {
  const { signatures: _drop, ...unsigned } = plain;
  const tried = new Set<string>();
  for (const form of [() => unsigned, () => withoutDefaults(unsigned, 'a2a'), () => withoutDefaults(unsigned, 'all')]) {
    let payload: string;
    try {
      payload = cardPayload(form());
    } catch {
      return null; // a form that cannot be canonicalised was not signed
    }
    if (tried.has(payload)) continue;
    tried.add(payload);
    const input = Buffer.from(`${header.protectedB64}.${Buffer.from(payload).toString('base64url')}`);
    if (verifyEd25519(key, input, header.signature)) return payload;
  }
  return null;
}

/** LosslessNumbers back to numbers (a card has no number that needs more than a double). */
function toPlain(v: unknown): unknown {
  if (isLosslessNumber(v)) return Number((v as { value: string }).value);
  if (Array.isArray(v)) return v.map(toPlain);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, toPlain(x)]));
  return v;
}

/** How deeply arrays and objects nest in `value`, counted without recursion (a hostile card may nest deep). */
function depthOf(value: unknown, limit: number): number {
  let level: unknown[] = [value];
  let depth = 0;
  while (depth <= limit) {
    const containers = level.filter((v) => v !== null && typeof v === 'object');
    if (containers.length === 0) return depth;
    depth++;
    level = containers.flatMap((v) => (Array.isArray(v) ? v : Object.values(v as object)));
  }
  return depth;
}

function checkSizes(card: Record<string, unknown>, sigs: unknown[]): CardResult | null {
  if (depthOf(card, LIMITS.depth) > LIMITS.depth) return fail('CARD_TOO_LARGE', `nested more than ${LIMITS.depth} levels deep`);
  if (sigs.length > LIMITS.signatures) return fail('CARD_TOO_LARGE', `more than ${LIMITS.signatures} signatures`);
  if (typeof card.name === 'string' && utf8Length(card.name) > LIMITS.nameBytes)
    return fail('CARD_TOO_LARGE', `name over ${LIMITS.nameBytes} bytes`);
  if (typeof card.description === 'string' && utf8Length(card.description) > LIMITS.descriptionBytes) {
    return fail('CARD_TOO_LARGE', `description over ${LIMITS.descriptionBytes} bytes`);
  }
  if (Array.isArray(card.skills)) {
    if (card.skills.length > LIMITS.skills) return fail('CARD_TOO_LARGE', `more than ${LIMITS.skills} skills`);
    for (const s of card.skills) {
      const tags = (s as { tags?: unknown })?.tags;
      if (Array.isArray(tags) && tags.length > LIMITS.tagsPerSkill)
        return fail('CARD_TOO_LARGE', `a skill with more than ${LIMITS.tagsPerSkill} tags`);
    }
  }
  return null;
}

const nonEmptyString = (v: unknown): v is string => typeof v === 'string' && v.length > 0;
const nonEmptyStrings = (v: unknown): v is string[] => Array.isArray(v) && v.length > 0 && v.every(nonEmptyString);

/** The A2A v1.0 required fields, non-empty, and the anet-card extension with canonical decimals. */
function checkSchema(card: Record<string, unknown>): { identity: CardIdentity; seq: bigint } | string {
  if (!nonEmptyString(card.name)) return 'name is required';
  if (!nonEmptyString(card.description)) return 'description is required';
  if (!nonEmptyString(card.version)) return 'version is required';
  const ifaces = card.supportedInterfaces;
  if (!Array.isArray(ifaces) || ifaces.length === 0) return 'supportedInterfaces is required';
  for (const i of ifaces as Record<string, unknown>[]) {
    if (!i || !nonEmptyString(i.url) || !nonEmptyString(i.protocolBinding) || !nonEmptyString(i.protocolVersion))
      return 'an interface needs url, protocolBinding, protocolVersion';
  }
  if (!nonEmptyStrings(card.defaultInputModes) || !nonEmptyStrings(card.defaultOutputModes))
    return 'defaultInputModes and defaultOutputModes are required';
  if (!Array.isArray(card.skills) || card.skills.length === 0) return 'at least one skill is required';
  for (const s of card.skills as Record<string, unknown>[]) {
    if (!s || !nonEmptyString(s.id) || !nonEmptyString(s.name) || !nonEmptyString(s.description) || !nonEmptyStrings(s.tags)) {
      return 'a skill needs id, name, description and tags';
    }
  }
  const caps = card.capabilities as Record<string, unknown> | undefined;
  if (!caps || typeof caps !== 'object') return 'capabilities is required';
  // Optional in A2A (a2a.proto `optional bool`): our cards set them (WIRE §3.1), other signers may not.
  for (const k of ['streaming', 'pushNotifications', 'extendedAgentCard']) {
    if (caps[k] !== undefined && typeof caps[k] !== 'boolean') return `capabilities.${k} must be a boolean`;
  }
  const exts = caps.extensions;
  if (!Array.isArray(exts)) return 'capabilities.extensions is required';
  const ext = (exts as Record<string, unknown>[]).find((e) => e?.uri === EXT_CARD);
  const p = ext?.params as Record<string, unknown> | undefined;
  if (!p) return 'the anet-card extension is required';
  const seq = canonicalU64(p.seq);
  if (!isAid(String(p.aid)) || seq === null || canonicalU64(p.issuedAt) === null || canonicalU64(p.notBefore) === null) {
    return 'anet-card aid, seq, issuedAt, notBefore must be an AID and canonical decimal strings';
  }
  return {
    identity: { aid: p.aid as string, seq: p.seq as string, issuedAt: p.issuedAt as string, notBefore: p.notBefore as string },
    seq,
  };
}

const KID = /^did:anet:(bafyrei[a-z2-7]{52})#(0|[1-9][0-9]*)$/;

function parseHeader(sig: unknown): { aid: string; ksn: number; protectedB64: string; signature: Uint8Array } | { error: string } {
  const s = sig as { protected?: unknown; signature?: unknown } | null;
  if (!s || typeof s.protected !== 'string' || typeof s.signature !== 'string')
    return { error: 'a signature needs protected and signature' };
  const headerBytes = fromB64url(s.protected);
  const signature = fromB64url(s.signature);
  if (!headerBytes || !signature) return { error: 'protected and signature must be unpadded base64url' };
  let header: Record<string, unknown>;
  try {
    header = parseStrict(Buffer.from(headerBytes).toString('utf8')) as Record<string, unknown>;
  } catch {
    return { error: 'the protected header is not JSON' };
  }
  if (!header || typeof header !== 'object' || header.alg !== 'EdDSA') return { error: 'alg must be EdDSA' };
  const kid = typeof header.kid === 'string' ? KID.exec(header.kid) : null;
  if (!kid) return { error: 'kid must be did:anet:<AID>#<n>' };
  const ksn = Number(kid[2]);
  if (!Number.isSafeInteger(ksn)) return { error: 'kid key number out of range' };
  if (canonicalize(header) === undefined) return { error: 'the protected header is not canonical JSON' };
  return { aid: kid[1]!, ksn, protectedB64: s.protected, signature };
}
