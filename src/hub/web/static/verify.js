// The card checked in the page, against the KEL checked in the page (PROTOCOL §3.7, checks 1–13; 14 and
// 15 need a high-water mark, which a page that just opened has not got). A port of
// src/protocol/card/verify.ts on the same libraries: the reader needs no server's word for the result.
import { sha256 } from '/web/lib/@noble/hashes/sha2.js';
import { fromBase64url, hex, toBase64url, utf8 } from './codec.js';
import { EXT_CARD } from './codes.js';
import { withoutDefaults } from './defaults.js';
import { canonicalize, depthOf, JsonError, parseStrict, TooDeep } from './json.js';
import { isAid, KelError, validateKel, verifySignature } from './kel.js';

const LIMITS = { cardBytes: 65536, nameBytes: 128, descriptionBytes: 4096, skills: 256, tagsPerSkill: 16, signatures: 8, depth: 32 };
const NOT_BEFORE_SKEW_MS = 300_000;
const MAX_U64 = (1n << 64n) - 1n;
const KID = /^did:anet:(bafyrei[a-z2-7]{52})#(0|[1-9][0-9]*)$/;

const fail = (code, detail) => ({ ok: false, code, detail });
const bytesOf = (s) => utf8.encode(s).length;

/**
 * `cardText`: the card as the hub served it; `kelBytes`: the KEL as it served it (null when it could not
 * be had). Returns {ok: true, kel, ksn, seq, digest} or {ok: false, code, detail, kel?}.
 */
export function verifyCard(cardText, kelBytes, now = Date.now()) {
  const kel = checkKel(kelBytes);
  const result = verifyAgainst(cardText, kel, now);
  return { ...result, kel };
}

/** The KEL's state, or {error: {code, message}}; null when there are no bytes. */
export function checkKel(kelBytes) {
  if (kelBytes === null) return null;
  try {
    return validateKel(kelBytes);
  } catch (err) {
    if (err instanceof KelError) return { error: { code: err.code, message: err.message } };
    throw err;
  }
}

function verifyAgainst(text, kel, now) {
  if (bytesOf(text) > LIMITS.cardBytes) return fail('CARD_TOO_LARGE', `card is over ${LIMITS.cardBytes} bytes`);
  const parsed = parseCard(text);
  if (parsed.fail) return parsed.fail;
  const card = parsed.card;
  if (typeof card !== 'object' || card === null || Array.isArray(card)) return fail('INVALID_CARD', 'a card is a JSON object');
  const sigs = card.signatures;
  if (!Array.isArray(sigs) || sigs.length === 0) return fail('UNSIGNED', 'no signatures');
  const size = checkSizes(card, sigs);
  if (size) return size;
  const schema = checkSchema(card);
  if (typeof schema === 'string') return fail('INVALID_CARD', schema);
  const header = parseHeader(sigs[0]);
  if (header.error) return fail('BAD_SIGNATURE_HEADER', header.error);
  const aid = schema.aid;
  if (card.supportedInterfaces[0].tenant !== aid || header.aid !== aid)
    return fail('BINDING_MISMATCH', 'tenant, kid AID and anet-card aid differ');
  if (kel === null) return fail('KEL_UNAVAILABLE', 'no KEL for this AID');
  if (kel.error) return fail('UNKNOWN_AID', `the KEL is invalid: ${kel.error.code} (${kel.error.message})`);
  if (kel.aid !== aid) return fail('UNKNOWN_AID', "the KEL is another AID's");
  if (header.ksn !== kel.ksn) return fail('KEY_NOT_CURRENT', `signed with key #${header.ksn}; the current key is #${kel.ksn}`);
  const signed = signedPayload(card, header, kel.currentKey);
  if (signed === null)
    return fail('INVALID_SIGNATURE', 'the signature does not verify over the card as received nor with its default-valued fields left out');
  if (BigInt(schema.notBefore) > BigInt(now + NOT_BEFORE_SKEW_MS))
    return fail('CARD_NOT_YET_VALID', `notBefore ${schema.notBefore} is in the future`);
  return { ok: true, ksn: header.ksn, seq: schema.seq, digest: hex(sha256(utf8.encode(signed))) };
}

/** Checks 2 and 5 (depth): bad JSON is MALFORMED_JSON; JSON nested past the parser's depth is too large. */
function parseCard(text) {
  try {
    return { card: parseStrict(text) };
  } catch (err) {
    if (err instanceof TooDeep && isJson(text)) return { fail: fail('CARD_TOO_LARGE', `nested more than ${LIMITS.depth} levels deep`) };
    if (err instanceof JsonError || err instanceof TooDeep || err instanceof SyntaxError)
      return { fail: fail('MALFORMED_JSON', err.message) };
    throw err;
  }
}

function isJson(text) {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** The JCS of the card as received, else of its forms without default-valued fields (PROTOCOL §3.5). */
function signedPayload(card, header, key) {
  const { signatures: _drop, ...unsigned } = card;
  const tried = new Set();
  for (const form of [() => unsigned, () => withoutDefaults(unsigned, 'a2a'), () => withoutDefaults(unsigned, 'all')]) {
    let payload;
    try {
      payload = canonicalize(form());
    } catch {
      return null;
    }
    if (tried.has(payload)) continue;
    tried.add(payload);
    const input = utf8.encode(`${header.protectedB64}.${toBase64url(utf8.encode(payload))}`);
    if (verifySignature(key, input, header.signature)) return payload;
  }
  return null;
}

function checkSizes(card, sigs) {
  if (depthOf(card, LIMITS.depth) > LIMITS.depth) return fail('CARD_TOO_LARGE', `nested more than ${LIMITS.depth} levels deep`);
  if (sigs.length > LIMITS.signatures) return fail('CARD_TOO_LARGE', `more than ${LIMITS.signatures} signatures`);
  if (typeof card.name === 'string' && bytesOf(card.name) > LIMITS.nameBytes)
    return fail('CARD_TOO_LARGE', `name over ${LIMITS.nameBytes} bytes`);
  if (typeof card.description === 'string' && bytesOf(card.description) > LIMITS.descriptionBytes)
    return fail('CARD_TOO_LARGE', `description over ${LIMITS.descriptionBytes} bytes`);
  if (Array.isArray(card.skills)) {
    if (card.skills.length > LIMITS.skills) return fail('CARD_TOO_LARGE', `more than ${LIMITS.skills} skills`);
    if (card.skills.some((s) => Array.isArray(s?.tags) && s.tags.length > LIMITS.tagsPerSkill))
      return fail('CARD_TOO_LARGE', `a skill with more than ${LIMITS.tagsPerSkill} tags`);
  }
  return null;
}

const nonEmptyString = (v) => typeof v === 'string' && v.length > 0;
const nonEmptyStrings = (v) => Array.isArray(v) && v.length > 0 && v.every(nonEmptyString);

function canonicalU64(v) {
  return typeof v === 'string' && /^(0|[1-9][0-9]*)$/.test(v) && BigInt(v) <= MAX_U64;
}

/** Check 6: A2A's required fields, and the anet-card stamp in canonical decimals. */
function checkSchema(card) {
  if (!nonEmptyString(card.name)) return 'name is required';
  if (!nonEmptyString(card.description)) return 'description is required';
  if (!nonEmptyString(card.version)) return 'version is required';
  const ifaces = card.supportedInterfaces;
  if (!Array.isArray(ifaces) || ifaces.length === 0) return 'supportedInterfaces is required';
  if (!ifaces.every((i) => i && nonEmptyString(i.url) && nonEmptyString(i.protocolBinding) && nonEmptyString(i.protocolVersion)))
    return 'an interface needs url, protocolBinding, protocolVersion';
  if (!nonEmptyStrings(card.defaultInputModes) || !nonEmptyStrings(card.defaultOutputModes))
    return 'defaultInputModes and defaultOutputModes are required';
  if (!Array.isArray(card.skills) || card.skills.length === 0) return 'at least one skill is required';
  if (
    !card.skills.every(
      (s) => s && nonEmptyString(s.id) && nonEmptyString(s.name) && nonEmptyString(s.description) && nonEmptyStrings(s.tags),
    )
  )
    return 'a skill needs id, name, description and tags';
  const caps = card.capabilities;
  if (!caps || typeof caps !== 'object') return 'capabilities is required';
  for (const k of ['streaming', 'pushNotifications', 'extendedAgentCard'])
    if (caps[k] !== undefined && typeof caps[k] !== 'boolean') return `capabilities.${k} must be a boolean`;
  if (!Array.isArray(caps.extensions)) return 'capabilities.extensions is required';
  const p = caps.extensions.find((e) => e?.uri === EXT_CARD)?.params;
  if (!p) return 'the anet-card extension is required';
  if (!isAid(String(p.aid)) || !canonicalU64(p.seq) || !canonicalU64(p.issuedAt) || !canonicalU64(p.notBefore))
    return 'anet-card aid, seq, issuedAt, notBefore must be an AID and canonical decimal strings';
  return { aid: p.aid, seq: p.seq, notBefore: p.notBefore };
}

/** Check 7: `signatures[0]`, strict base64url, alg EdDSA, kid did:anet:<AID>#<n>. */
function parseHeader(sig) {
  if (!sig || typeof sig.protected !== 'string' || typeof sig.signature !== 'string')
    return { error: 'a signature needs protected and signature' };
  const headerBytes = fromBase64url(sig.protected);
  const signature = fromBase64url(sig.signature);
  if (!headerBytes || !signature) return { error: 'protected and signature must be unpadded base64url' };
  let header;
  try {
    header = parseStrict(new TextDecoder('utf-8', { fatal: true }).decode(headerBytes));
  } catch {
    return { error: 'the protected header is not JSON' };
  }
  if (!header || typeof header !== 'object' || header.alg !== 'EdDSA') return { error: 'alg must be EdDSA' };
  const kid = typeof header.kid === 'string' ? KID.exec(header.kid) : null;
  if (!kid) return { error: 'kid must be did:anet:<AID>#<n>' };
  const ksn = Number(kid[2]);
  if (!Number.isSafeInteger(ksn)) return { error: 'kid key number out of range' };
  return { aid: kid[1], ksn, protectedB64: sig.protected, signature };
}
