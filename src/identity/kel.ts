// Key event log (WIRE.md §2): inception with a pre-rotated next key, rotations signed by the previous key,
// AID = CID of the inception bytes. Validation refuses every broken rule with a code and the seq.
import { sha256 } from '@noble/hashes/sha2.js';
import { encodeCanonical, decodeCanonical, bytesEqual, CborError, type CborValue } from './cbor.js';
import { cidOf } from './cid.js';
import { verify, isValidPublicKey, type Signer } from './ed25519.js';

export interface KeyEvent {
  aid?: string;
  seq: number;
  prev?: string;
  type: 'icp' | 'rot';
  keys: Uint8Array[];
  nextDigest: Uint8Array;
  threshold: number;
  ts: number;
}

export interface SignedEvent {
  event: KeyEvent;
  sig: Uint8Array;
  id: string;
}

export interface KelState {
  aid: string;
  events: SignedEvent[];
  /** The key that signs now: the key of the last establishment event. */
  currentKey: Uint8Array;
  /** Key sequence number: the seq of that establishment event (the `#n` of a kid). */
  ksn: number;
  nextDigest: Uint8Array;
}

export type KelErrorCode =
  | 'MALFORMED'
  | 'NOT_CANONICAL'
  | 'EMPTY'
  | 'BAD_EVENT_ID'
  | 'BAD_SIGNATURE'
  | 'SEQ_GAP'
  | 'BROKEN_LINK'
  | 'WRONG_AID'
  | 'WRONG_NEXT_KEY';

export class KelError extends Error {
  override name = 'KelError';
  constructor(
    readonly code: KelErrorCode,
    message: string,
    readonly seq?: number,
  ) {
    super(seq === undefined ? message : `event ${seq}: ${message}`);
  }
}

export function digestOfKey(publicKey: Uint8Array): Uint8Array {
  return sha256(publicKey);
}

function eventToCbor(e: KeyEvent): Map<number, CborValue> {
  const m = new Map<number, CborValue>();
  if (e.aid !== undefined) m.set(1, e.aid);
  m.set(2, e.seq);
  if (e.prev !== undefined) m.set(3, e.prev);
  m.set(4, e.type);
  m.set(5, e.keys);
  m.set(6, e.nextDigest);
  m.set(7, e.threshold);
  if (e.ts !== 0) m.set(8, e.ts);
  return m;
}

export function eventBytes(e: KeyEvent): Uint8Array {
  return encodeCanonical(eventToCbor(e));
}

function isUint(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

function isBytes(v: unknown, length?: number): v is Uint8Array {
  return v instanceof Uint8Array && (length === undefined || v.length === length);
}

const EVENT_KEYS = new Set([1, 2, 3, 4, 5, 6, 7, 8]);

function eventFromCbor(v: CborValue, at: number): KeyEvent {
  const bad = (what: string): never => {
    throw new KelError('MALFORMED', what, at);
  };
  if (!(v instanceof Map)) return bad('an event is a CBOR map');
  for (const k of v.keys()) if (typeof k !== 'number' || !EVENT_KEYS.has(k)) bad(`unknown event key ${String(k)}`);
  const aid = v.get(1),
    seq = v.get(2),
    prev = v.get(3),
    type = v.get(4),
    keys = v.get(5);
  const nextDigest = v.get(6),
    threshold = v.get(7),
    ts = v.get(8);
  if (!isUint(seq)) bad('seq must be an unsigned integer');
  if (type !== 'icp' && type !== 'rot') bad('type must be "icp" or "rot"');
  if (type === 'icp' && (aid !== undefined || prev !== undefined)) bad('an inception has no aid and no prev');
  if (type === 'rot' && (typeof aid !== 'string' || typeof prev !== 'string')) bad('a rotation needs aid and prev');
  if (!Array.isArray(keys) || keys.length !== 1 || !isBytes(keys[0], 32)) bad('keys must hold one 32-byte key');
  if (!isValidPublicKey((keys as Uint8Array[])[0]!)) bad('the key is not a valid Ed25519 public key (non-canonical or small order)');
  if (!isBytes(nextDigest, 32)) bad('next_digest must be 32 bytes');
  if (threshold !== 1) bad('threshold must be 1');
  if (ts !== undefined && (!isUint(ts) || ts === 0)) bad('ts must be a positive integer, omitted when 0');
  const event: KeyEvent = {
    seq: seq as number,
    type: type as 'icp' | 'rot',
    keys: keys as Uint8Array[],
    nextDigest: nextDigest as Uint8Array,
    threshold: 1,
    ts: (ts as number | undefined) ?? 0,
  };
  if (typeof aid === 'string') event.aid = aid;
  if (typeof prev === 'string') event.prev = prev;
  return event;
}

export function signEvent(event: KeyEvent, signer: Signer): SignedEvent {
  const bytes = eventBytes(event);
  return { event, sig: signer.sign(bytes), id: cidOf(bytes) };
}

export function incept(current: Signer, nextPublicKey: Uint8Array, ts: number): SignedEvent {
  return signEvent({ seq: 0, type: 'icp', keys: [current.publicKey], nextDigest: digestOfKey(nextPublicKey), threshold: 1, ts }, current);
}

/** A rotation to `next` (which must match the pre-rotated digest), signed by the previous key. */
export function rotate(state: KelState, previous: Signer, next: Signer, nextNextPublicKey: Uint8Array, ts: number): SignedEvent {
  if (!bytesEqual(previous.publicKey, state.currentKey)) throw new Error('rotation must be signed by the current key');
  if (!bytesEqual(digestOfKey(next.publicKey), state.nextDigest)) throw new Error('the new key is not the pre-rotated next key');
  const last = state.events[state.events.length - 1]!;
  return signEvent(
    {
      aid: state.aid,
      seq: last.event.seq + 1,
      prev: last.id,
      type: 'rot',
      keys: [next.publicKey],
      nextDigest: digestOfKey(nextNextPublicKey),
      threshold: 1,
      ts,
    },
    previous,
  );
}

export function encodeKel(events: SignedEvent[]): Uint8Array {
  return encodeCanonical(
    events.map(
      (s) =>
        new Map<number, CborValue>([
          [1, eventToCbor(s.event)],
          [2, s.sig],
          [3, s.id],
        ]),
    ),
  );
}

export function decodeKel(bytes: Uint8Array): SignedEvent[] {
  let value: CborValue;
  try {
    value = decodeCanonical(bytes);
  } catch (err) {
    throw new KelError(
      err instanceof CborError && /deterministic/.test(err.message) ? 'NOT_CANONICAL' : 'MALFORMED',
      (err as Error).message,
    );
  }
  if (!Array.isArray(value)) throw new KelError('MALFORMED', 'a KEL is a CBOR array of signed events');
  return value.map((item, at) => {
    if (!(item instanceof Map) || item.size !== 3) throw new KelError('MALFORMED', 'a signed event is {1 event, 2 sig, 3 event_id}', at);
    const sig = item.get(2),
      id = item.get(3);
    if (!isBytes(sig, 64)) throw new KelError('MALFORMED', 'sig must be 64 bytes', at);
    if (typeof id !== 'string') throw new KelError('MALFORMED', 'event_id must be text', at);
    return { event: eventFromCbor(item.get(1) as CborValue, at), sig, id };
  });
}

/** Checks every rule of WIRE.md §2 and returns the resulting key state. */
/**
 * KELs validated from bytes, by those bytes: a hub checks the same few hundred bytes on every signed
 * request. Bounded in count and in size (a KEL of a few rotations is well under 8 KiB; a long one, which
 * anyone can send unsigned to a hub's registration, is validated each time rather than held): at most
 * about 1024 × (8 KiB and its decoded events).
 */
const validated = new Map<string, KelState>();
const VALIDATED_MAX = 1024;
const VALIDATED_MAX_BYTES = 8192;

export function validateKel(input: Uint8Array | SignedEvent[]): KelState {
  if (!(input instanceof Uint8Array)) return validateEvents(input);
  if (input.byteLength > VALIDATED_MAX_BYTES) return validateEvents(decodeKel(input));
  // The same bytes always validate to the same state (a pure function of them); only successes are kept,
  // frozen, so no holder can change what another is handed.
  const key = Buffer.from(input.buffer, input.byteOffset, input.byteLength).toString('latin1');
  const known = validated.get(key);
  if (known) return known;
  const state = validateEvents(decodeKel(input));
  Object.freeze(state.events);
  Object.freeze(state);
  if (validated.size >= VALIDATED_MAX) validated.delete(validated.keys().next().value!);
  validated.set(key, state);
  return state;
}

function validateEvents(events: SignedEvent[]): KelState {
  if (events.length === 0) throw new KelError('EMPTY', 'a KEL holds at least its inception');
  let state: KelState | undefined;
  for (const [at, signed] of events.entries()) state = applyEvent(state, signed, at);
  return state!;
}

function applyEvent(state: KelState | undefined, signed: SignedEvent, at: number): KelState {
  const { event } = signed;
  const bytes = eventBytes(event);
  if (cidOf(bytes) !== signed.id) throw new KelError('BAD_EVENT_ID', 'event_id is not the CID of the event', at);
  if (event.seq !== at) throw new KelError('SEQ_GAP', `seq ${event.seq} where ${at} was due`, at);
  if (state === undefined) {
    if (event.type !== 'icp') throw new KelError('MALFORMED', 'the first event must be an inception', at);
    if (!verify(event.keys[0]!, bytes, signed.sig)) throw new KelError('BAD_SIGNATURE', 'inception not signed by its own key', at);
    return { aid: signed.id, events: [signed], currentKey: event.keys[0]!, ksn: 0, nextDigest: event.nextDigest };
  }
  const last = state.events[state.events.length - 1]!;
  if (event.type !== 'rot') throw new KelError('MALFORMED', 'only the first event is an inception', at);
  if (event.aid !== state.aid) throw new KelError('WRONG_AID', 'aid differs from the inception', at);
  if (event.prev !== last.id) throw new KelError('BROKEN_LINK', 'prev is not the previous event id', at);
  if (!bytesEqual(digestOfKey(event.keys[0]!), state.nextDigest)) {
    throw new KelError('WRONG_NEXT_KEY', 'the new key does not match the pre-rotated next digest', at);
  }
  if (!verify(state.currentKey, bytes, signed.sig)) throw new KelError('BAD_SIGNATURE', 'rotation not signed by the previous key', at);
  return { aid: state.aid, events: [...state.events, signed], currentKey: event.keys[0]!, ksn: event.seq, nextDigest: event.nextDigest };
}

export type KelComparison =
  | { kind: 'same' }
  | { kind: 'extension'; added: number }
  | { kind: 'shorter' }
  | { kind: 'duplicity'; seq: number; known: SignedEvent; other: SignedEvent }
  | { kind: 'other_aid' };

/**
 * How a validated `incoming` KEL relates to the `known` one. Only `same` and `extension` may be accepted;
 * `duplicity` is a second, validly signed event at a seq already seen: keep both as evidence.
 */
export function compareKel(known: KelState, incoming: KelState): KelComparison {
  if (incoming.aid !== known.aid) return { kind: 'other_aid' };
  const common = Math.min(known.events.length, incoming.events.length);
  for (let seq = 0; seq < common; seq++) {
    const a = known.events[seq]!,
      b = incoming.events[seq]!;
    if (a.id !== b.id) return { kind: 'duplicity', seq, known: a, other: b };
  }
  if (incoming.events.length === known.events.length) return { kind: 'same' };
  if (incoming.events.length < known.events.length) return { kind: 'shorter' };
  return { kind: 'extension', added: incoming.events.length - known.events.length };
}
