// Envelopes between nodes (WIRE.md §4): an HPKE-sealed, signed inner message inside an outer CBOR map
// that shows the hub only the recipient AID, the suite, the key id and a padded size.
import { randomId } from '../util/random.js';
import { encodeCanonical, decodeCanonical, decodeStrict, type CborError, type CborValue } from '../identity/cbor.js';
import { verify as verifyEd25519, type Signer } from '../identity/ed25519.js';
import type { KelState } from '../identity/kel.js';
import { seal, open, type X25519KeyPair } from './hpke.js';

export const SUITE = 1;
const INFO_LABEL = 'anet-relay/v1';
/** Inner map keys WIRE §4 defines; unknown keys below 64 are refused, 64 and above are extensions. */
const KNOWN_INNER = new Set([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 20, 21]);
const MIN_PADDED = 256;
/**
 * The longest lifetime a receiver accepts: the hub's default mailbox TTL (7 days, `--mailbox-ttl`), so
 * mail kept for a node that was offline is still taken when it comes back. The replay guard keeps each
 * mid until its message's `exp`, within a bound of its own (src/relay/replay-guard.ts).
 */
export const MAX_MESSAGE_TTL_MS = 7 * 24 * 3_600_000;
/**
 * The lifetime of a message whose sender waits for an answer (a call, a payment, a card request, their
 * replies): past it the sender has moved on, so keeping it longer would only fill mailboxes and the
 * receivers' replay guards. Text tasks, answered when their operator gets to them, use the long one.
 */
export const PROMPT_MESSAGE_TTL_MS = 15 * 60_000;
/** How far ahead of the receiver's clock a sender's `ts` may be. */
export const MAX_CLOCK_SKEW_MS = 5 * 60_000;

export interface Message {
  type: string;
  /** Position of this message in its exchange (0 for the first). */
  ix: number;
  ts: number;
  exp: number;
  body: CborValue;
  kel?: Uint8Array;
  keys?: Uint8Array;
}

export interface Received extends Message {
  from: string;
  ksn: number;
  to: string;
  mid: Uint8Array;
}

export interface RecipientKey {
  aid: string;
  kid: Uint8Array;
  publicKey: Uint8Array;
}

export type EnvelopeError =
  | 'MALFORMED'
  | 'BAD_TIME'
  | 'UNKNOWN_KID'
  | 'UNDECRYPTABLE'
  | 'UNKNOWN_FIELD'
  | 'NOT_FOR_ME'
  | 'EXPIRED'
  | 'REPLAYED'
  | 'UNKNOWN_SENDER'
  | 'BAD_SIGNATURE';

export class EnvelopeRefused extends Error {
  constructor(
    readonly code: EnvelopeError,
    detail: string,
  ) {
    super(`${code}: ${detail}`);
  }
}

/** HPKE info per recipient and key id (a node talks to few): remembered, bounded. */
const infos = new Map<string, Uint8Array>();

function info(to: string, kid: Uint8Array): Uint8Array {
  const id = `${to}/${Buffer.from(kid.buffer, kid.byteOffset, kid.byteLength).toString('hex')}`;
  let bytes = infos.get(id);
  if (!bytes) {
    bytes = encodeCanonical(
      new Map<number, CborValue>([
        [1, INFO_LABEL],
        [2, to],
        [3, SUITE],
        [4, kid],
      ]),
    );
    if (infos.size >= 1024) infos.clear();
    infos.set(id, bytes);
  }
  return bytes;
}

function innerMap(m: Received): Map<number, CborValue> {
  const map = new Map<number, CborValue>([
    [1, m.from],
    [2, m.ksn],
    [3, m.to],
    [4, m.type],
    [5, m.ix],
    [6, m.mid],
    [7, m.ts],
    [8, m.exp],
    [9, m.body],
  ]);
  if (m.kel) map.set(10, m.kel);
  if (m.keys) map.set(12, m.keys);
  return map;
}

/** Bytes a CBOR byte-string header adds beyond its first byte, for a string of `n` bytes. */
const headerExtra = (n: number) => (n < 24 ? 0 : n < 256 ? 1 : n < 65_536 ? 2 : 4);

/** The CoreDet head of a CBOR item of major type `major` (0..7) with argument `n`. */
function head(major: number, n: number): Uint8Array {
  const m = major << 5;
  if (n < 24) return Uint8Array.of(m | n);
  if (n < 256) return Uint8Array.of(m | 24, n);
  if (n < 65_536) return Uint8Array.of(m | 25, n >> 8, n & 0xff);
  return Uint8Array.of(m | 26, (n >>> 24) & 0xff, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff);
}

/** Encoded size of a value of the inner map (byte strings without encoding them). */
const encodedSize = (v: CborValue): number => (v instanceof Uint8Array ? 1 + headerExtra(v.length) + v.length : encodeCanonical(v).length);

/**
 * The signed inner map plus the signature (key 20) and the pad (key 21), padded to the next power of two
 * (at least 256) so sizes tell the hub little. The pad's own length header grows at 24, 256 and 65536
 * bytes, so some totals cannot be hit exactly: then the next power of two is used.
 *
 * Built from the signed bytes without encoding the map again: the signed map holds keys 1–12 only,
 * which sort before 20 and 21 (RFC 8949 §4.2.1, bytewise), so the padded map is the signed one with its
 * entry count raised by two and the two entries appended.
 */
function padded(signed: Uint8Array, entries: number, sig: Uint8Array): Uint8Array {
  const oldHead = head(5, entries).length;
  const sigEntry = Buffer.concat([Uint8Array.of(20), head(2, sig.length), sig]);
  const mapHead = head(5, entries + 2);
  // The whole map with an empty pad: its head, the signed entries, the signature, then 0x15 0x40.
  const base = mapHead.length + (signed.length - oldHead) + sigEntry.length + 2;
  for (let target = Math.max(MIN_PADDED, 2 ** Math.ceil(Math.log2(base))); ; target *= 2) {
    const need = target - base;
    for (const extra of [0, 1, 2, 4]) {
      const length = need - extra;
      if (length >= 0 && headerExtra(length) === extra) {
        return new Uint8Array(
          Buffer.concat([mapHead, signed.subarray(oldHead), sigEntry, Uint8Array.of(21), head(2, length), new Uint8Array(length)]),
        );
      }
    }
  }
}

/**
 * The signed part of a CoreDet inner map (without keys 20 and 21), cut from its bytes: in CoreDet order
 * the known keys (1–12) come first, then 20 and 21, then the extensions (64 and up).
 */
function signedPart(plaintext: Uint8Array, inner: Map<number | string, CborValue>): Uint8Array {
  let cut = 0;
  let removed = 0;
  let tail = 0;
  for (const [k, v] of inner) {
    if (k === 20 || k === 21) {
      cut += 1 + encodedSize(v);
      removed++;
    } else if ((k as number) >= 64) tail += encodeCanonical(k).length + encodedSize(v);
  }
  const oldHead = head(5, inner.size).length;
  const end = plaintext.length - tail;
  const start = end - cut;
  return new Uint8Array(Buffer.concat([head(5, inner.size - removed), plaintext.subarray(oldHead, start), plaintext.subarray(end)]));
}

export function sealEnvelope(
  sender: { aid: string; ksn: number; signer: Signer },
  to: RecipientKey,
  message: Message,
): { bytes: Uint8Array; mid: Uint8Array } {
  const mid = new Uint8Array(randomId(16));
  const inner = innerMap({ ...message, from: sender.aid, ksn: sender.ksn, to: to.aid, mid });
  const signed = encodeCanonical(inner);
  const sig = sender.signer.sign(signed);
  const plaintext = padded(signed, inner.size, sig);
  const { enc, ct } = seal(to.publicKey, info(to.aid, to.kid), new Uint8Array(), plaintext);
  const outer = new Map<number, CborValue>([
    [1, 1],
    [2, to.aid],
    [3, SUITE],
    [4, to.kid],
    [5, enc],
    [6, ct],
  ]);
  return { bytes: encodeCanonical(outer), mid };
}

export interface OpenContext {
  me: string;
  /** Our encryption keys by hex kid. */
  keys: Map<string, X25519KeyPair>;
  now: number;
  /** True when this mid was seen before (or may have been: `ts` is the send time); records it (until `exp`) otherwise. */
  seen(mid: Uint8Array, exp: number, ts: number): boolean | Promise<boolean>;
  /** The sender's KEL, extended by the tail it sent when that is valid; null when unknown. */
  kelOf(aid: string, tail: Uint8Array | undefined): KelState | null | Promise<KelState | null>;
}

/**
 * The outer envelope's recipient, as the hub reads it (nothing else is in the clear). The hub does not
 * encode the envelope again to check its CoreDet form: the recipient does, and refuses it otherwise.
 */
export function envelopeRecipient(bytes: Uint8Array): string {
  const outer = decodeStrict(bytes);
  const to = outer instanceof Map ? outer.get(2) : undefined;
  if (typeof to !== 'string') throw new EnvelopeRefused('MALFORMED', 'the envelope names no recipient');
  return to;
}

export async function openEnvelope(bytes: Uint8Array, ctx: OpenContext): Promise<Received> {
  const outer = decode(bytes, 'envelope');
  const to = outer.get(2),
    kid = outer.get(4),
    enc = outer.get(5),
    ct = outer.get(6);
  if (
    outer.get(1) !== 1 ||
    outer.get(3) !== SUITE ||
    typeof to !== 'string' ||
    !(kid instanceof Uint8Array) ||
    kid.length !== 16 ||
    !(enc instanceof Uint8Array) ||
    !(ct instanceof Uint8Array)
  ) {
    throw new EnvelopeRefused('MALFORMED', 'not a v1 envelope of suite 1');
  }
  if (to !== ctx.me) throw new EnvelopeRefused('NOT_FOR_ME', `addressed to ${to}`);
  const key = ctx.keys.get(Buffer.from(kid).toString('hex'));
  if (!key) throw new EnvelopeRefused('UNKNOWN_KID', 'no encryption key with this id');
  let plaintext: Uint8Array;
  try {
    plaintext = open(key, info(to, kid), new Uint8Array(), enc, ct);
  } catch (err) {
    throw new EnvelopeRefused('UNDECRYPTABLE', (err as Error).message);
  }
  const inner = decode(plaintext, 'inner message');
  for (const k of inner.keys()) {
    if (typeof k !== 'number' || (k < 64 && !KNOWN_INNER.has(k))) throw new EnvelopeRefused('UNKNOWN_FIELD', `inner key ${String(k)}`);
  }
  const m = fields(inner);
  if (m.to !== ctx.me) throw new EnvelopeRefused('NOT_FOR_ME', 'the signed recipient is another AID');
  if (m.exp <= ctx.now) throw new EnvelopeRefused('EXPIRED', `expired at ${m.exp}`);
  if (m.ts > ctx.now + MAX_CLOCK_SKEW_MS || m.exp > ctx.now + MAX_MESSAGE_TTL_MS || m.exp < m.ts) {
    throw new EnvelopeRefused('BAD_TIME', `ts ${m.ts} / exp ${m.exp} out of bounds at ${ctx.now}`);
  }
  const kel = await ctx.kelOf(m.from, m.kel);
  if (!kel) throw new EnvelopeRefused('UNKNOWN_SENDER', `no valid KEL for ${m.from}`);
  const sig = inner.get(20);
  if (m.ksn !== kel.ksn || !(sig instanceof Uint8Array) || !verifyEd25519(kel.currentKey, signedPart(plaintext, inner), sig)) {
    throw new EnvelopeRefused('BAD_SIGNATURE', "not signed by the sender's current key");
  }
  // Replay is checked last, so a forged copy cannot burn a genuine message's mid.
  if (await ctx.seen(m.mid, m.exp, m.ts)) throw new EnvelopeRefused('REPLAYED', 'this message was already received');
  return m;
}

function decode(bytes: Uint8Array, what: string): Map<number | string, CborValue> {
  let v: CborValue;
  try {
    v = decodeCanonical(bytes);
  } catch (err) {
    throw new EnvelopeRefused('MALFORMED', `${what}: ${(err as CborError).message}`);
  }
  if (!(v instanceof Map)) throw new EnvelopeRefused('MALFORMED', `${what} is not a CBOR map`);
  return v;
}

function fields(inner: Map<number | string, CborValue>): Received {
  const get = <T>(k: number, check: (v: unknown) => v is T, name: string): T => {
    const v = inner.get(k);
    if (!check(v)) throw new EnvelopeRefused('MALFORMED', `inner ${name} is missing or of the wrong type`);
    return v;
  };
  const str = (v: unknown): v is string => typeof v === 'string';
  const uint = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
  const bytes = (v: unknown): v is Uint8Array => v instanceof Uint8Array;
  const m: Received = {
    from: get(1, str, 'from'),
    ksn: get(2, uint, 'ksn'),
    to: get(3, str, 'to'),
    type: get(4, str, 'type'),
    ix: get(5, uint, 'ix'),
    mid: get(6, (v): v is Uint8Array => bytes(v) && v.length === 16, 'mid'),
    ts: get(7, uint, 'ts'),
    exp: get(8, uint, 'exp'),
    body: inner.get(9) ?? null,
  };
  if (inner.has(10)) m.kel = get(10, bytes, 'kel');
  if (inner.has(12)) m.keys = get(12, bytes, 'keys');
  return m;
}
