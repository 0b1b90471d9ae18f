// The KEL checked in the page (PROTOCOL §2.2–§2.4): strict CoreDet CBOR, each event id the CID of its
// bytes, the inception signed by its own key (its id is the AID), each rotation by the key before it and
// to the key that one committed to. The same rules, codes and libraries as src/identity/kel.ts.
import { decode, encode } from '/web/lib/cborg/cborg.js';
import { ed25519 } from '/web/lib/@noble/curves/ed25519.js';
import { sha256 } from '/web/lib/@noble/hashes/sha2.js';
import { base32, equalBytes, fromBase32 } from './codec.js';

export class KelError extends Error {
  constructor(code, message, seq) {
    super(seq === undefined ? message : `event ${seq}: ${message}`);
    this.code = code;
  }
}

const STRICT = {
  strict: true,
  useMaps: true,
  rejectDuplicateMapKeys: true,
  allowIndefinite: false,
  allowUndefined: false,
  allowNaN: false,
  allowInfinity: false,
  tags: [],
};

const CID_PREFIX = Uint8Array.of(0x01, 0x71, 0x12, 0x20);

/** PROTOCOL §1.3: CIDv1, dag-cbor, sha2-256, base32 with the "b" prefix. */
export function cidOf(bytes) {
  const binary = new Uint8Array(36);
  binary.set(CID_PREFIX);
  binary.set(sha256(bytes), 4);
  return `b${base32(binary)}`;
}

export function isAid(text) {
  if (typeof text !== 'string' || !/^bafyrei[a-z2-7]{52}$/.test(text)) return false;
  const binary = fromBase32(text.slice(1));
  return binary !== null && binary.length === 36 && equalBytes(binary.subarray(0, 4), CID_PREFIX);
}

/** Strict RFC 8032 verification (PROTOCOL §2.1): canonical encodings, S < L, no small-order key. */
export function verifySignature(publicKey, message, signature) {
  try {
    return signature.length === 64 && ed25519.verify(signature, message, publicKey, { zip215: false });
  } catch {
    return false;
  }
}

function isValidPublicKey(key) {
  try {
    return !ed25519.Point.fromBytes(key, false).isSmallOrder();
  } catch {
    return false;
  }
}

function decodeKel(bytes) {
  let value;
  try {
    value = decode(bytes, STRICT);
  } catch (err) {
    throw new KelError('MALFORMED', `not valid CBOR: ${err.message}`);
  }
  if (!equalBytes(encode(value), bytes)) throw new KelError('NOT_CANONICAL', 'CBOR is not in deterministic (CoreDet) form');
  if (!Array.isArray(value)) throw new KelError('MALFORMED', 'a KEL is a CBOR array of signed events');
  return value.map((item, at) => {
    if (!(item instanceof Map) || item.size !== 3) throw new KelError('MALFORMED', 'a signed event is {1 event, 2 sig, 3 event_id}', at);
    const sig = item.get(2);
    const id = item.get(3);
    if (!(sig instanceof Uint8Array) || sig.length !== 64) throw new KelError('MALFORMED', 'sig must be 64 bytes', at);
    if (typeof id !== 'string') throw new KelError('MALFORMED', 'event_id must be text', at);
    const raw = item.get(1);
    return { event: eventOf(raw, at), bytes: raw instanceof Map ? encode(raw) : null, sig, id };
  });
}

const isUint = (v) => Number.isSafeInteger(v) && v >= 0;
const isBytes = (v, n) => v instanceof Uint8Array && v.length === n;

function eventOf(v, at) {
  const bad = (what) => {
    throw new KelError('MALFORMED', what, at);
  };
  if (!(v instanceof Map)) bad('an event is a CBOR map');
  for (const k of v.keys()) if (!Number.isInteger(k) || k < 1 || k > 8) bad(`unknown event key ${String(k)}`);
  const [aid, seq, prev, type, keys, nextDigest, threshold, ts] = [1, 2, 3, 4, 5, 6, 7, 8].map((k) => v.get(k));
  if (!isUint(seq)) bad('seq must be an unsigned integer');
  if (type !== 'icp' && type !== 'rot') bad('type must be "icp" or "rot"');
  if (type === 'icp' && (aid !== undefined || prev !== undefined)) bad('an inception has no aid and no prev');
  if (type === 'rot' && (typeof aid !== 'string' || typeof prev !== 'string')) bad('a rotation needs aid and prev');
  if (!Array.isArray(keys) || keys.length !== 1 || !isBytes(keys[0], 32)) bad('keys must hold one 32-byte key');
  if (!isValidPublicKey(keys[0])) bad('the key is not a valid Ed25519 public key (non-canonical or small order)');
  if (!isBytes(nextDigest, 32)) bad('next_digest must be 32 bytes');
  if (threshold !== 1) bad('threshold must be 1');
  if (ts !== undefined && (!isUint(ts) || ts === 0)) bad('ts must be a positive integer, omitted when 0');
  return { aid, seq, prev, type, key: keys[0], nextDigest, ts: ts ?? 0 };
}

/**
 * Validates KEL bytes; returns {aid, events, currentKey, ksn} where each event is
 * {seq, type, key, nextDigest, ts, id}. Throws a KelError with the code of PROTOCOL §2.4.
 */
export function validateKel(bytes) {
  const signed = decodeKel(bytes);
  if (signed.length === 0) throw new KelError('EMPTY', 'a KEL holds at least its inception');
  let state;
  for (const [at, s] of signed.entries()) state = applyEvent(state, s, at);
  return state;
}

function applyEvent(state, { event, bytes, sig, id }, at) {
  if (cidOf(bytes) !== id) throw new KelError('BAD_EVENT_ID', 'event_id is not the CID of the event', at);
  if (event.seq !== at) throw new KelError('SEQ_GAP', `seq ${event.seq} where ${at} was due`, at);
  const shown = { ...event, id };
  if (state === undefined) {
    if (event.type !== 'icp') throw new KelError('MALFORMED', 'the first event must be an inception', at);
    if (!verifySignature(event.key, bytes, sig)) throw new KelError('BAD_SIGNATURE', 'inception not signed by its own key', at);
    return { aid: id, events: [shown], currentKey: event.key, ksn: 0, nextDigest: event.nextDigest };
  }
  const last = state.events[state.events.length - 1];
  if (event.type !== 'rot') throw new KelError('MALFORMED', 'only the first event is an inception', at);
  if (event.aid !== state.aid) throw new KelError('WRONG_AID', 'aid differs from the inception', at);
  if (event.prev !== last.id) throw new KelError('BROKEN_LINK', 'prev is not the previous event id', at);
  if (!equalBytes(sha256(event.key), state.nextDigest))
    throw new KelError('WRONG_NEXT_KEY', 'the new key does not match the pre-rotated next digest', at);
  if (!verifySignature(state.currentKey, bytes, sig)) throw new KelError('BAD_SIGNATURE', 'rotation not signed by the previous key', at);
  return { aid: state.aid, events: [...state.events, shown], currentKey: event.key, ksn: event.seq, nextDigest: event.nextDigest };
}
