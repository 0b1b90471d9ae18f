// Envelopes between nodes (WIRE.md §4): an HPKE-sealed, signed inner message inside an outer CBOR map
// that shows the hub only the recipient AID, the suite, the key id and a padded size.
import { randomBytes } from 'node:crypto';
import { encodeCanonical, decodeCanonical, CborError, type CborValue } from '../identity/cbor.js';
import { verify as verifyEd25519, type Signer } from '../identity/ed25519.js';
import type { KelState } from '../identity/kel.js';
import { seal, open, type X25519KeyPair } from './hpke.js';

export const SUITE = 1;
const INFO_LABEL = 'anet-relay/v1';
/** Inner map keys WIRE §4 defines; unknown keys below 64 are refused, 64 and above are extensions. */
const KNOWN_INNER = new Set([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 20, 21]);
const MIN_PADDED = 256;
/** The longest lifetime a receiver accepts (the hub queues for 10 minutes), so remembered mids stay few. */
export const MAX_MESSAGE_TTL_MS = 15 * 60_000;
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

export type EnvelopeError = 'MALFORMED' | 'BAD_TIME' | 'UNKNOWN_KID' | 'UNDECRYPTABLE' | 'UNKNOWN_FIELD' | 'NOT_FOR_ME' | 'EXPIRED' | 'REPLAYED' | 'UNKNOWN_SENDER' | 'BAD_SIGNATURE';

export class EnvelopeRefused extends Error {
  constructor(readonly code: EnvelopeError, detail: string) {
    super(`${code}: ${detail}`);
  }
}

function info(to: string, kid: Uint8Array): Uint8Array {
  return encodeCanonical(new Map<number, CborValue>([[1, INFO_LABEL], [2, to], [3, SUITE], [4, kid]]));
}

function innerMap(m: Received): Map<number, CborValue> {
  const map = new Map<number, CborValue>([
    [1, m.from], [2, m.ksn], [3, m.to], [4, m.type], [5, m.ix], [6, m.mid], [7, m.ts], [8, m.exp], [9, m.body],
  ]);
  if (m.kel) map.set(10, m.kel);
  if (m.keys) map.set(12, m.keys);
  return map;
}

/** Bytes a CBOR byte-string header adds beyond its first byte, for a string of `n` bytes. */
const headerExtra = (n: number) => (n < 24 ? 0 : n < 256 ? 1 : n < 65_536 ? 2 : 4);

/**
 * Pads the inner bytes to the next power of two (at least 256) so sizes tell the hub little. The pad's
 * own length header grows at 24, 256 and 65536 bytes, so some totals cannot be hit exactly: then the
 * next power of two is used.
 */
function padded(signed: Map<number, CborValue>): Uint8Array {
  const withPad = (length: number) => encodeCanonical(new Map([...signed, [21, new Uint8Array(length)]]));
  const base = withPad(0).length;
  for (let target = Math.max(MIN_PADDED, 2 ** Math.ceil(Math.log2(base))); ; target *= 2) {
    const need = target - base;
    for (const extra of [0, 1, 2, 4]) {
      const length = need - extra;
      if (length >= 0 && headerExtra(length) === extra) return withPad(length);
    }
  }
}

export function sealEnvelope(sender: { aid: string; ksn: number; signer: Signer }, to: RecipientKey, message: Message): { bytes: Uint8Array; mid: Uint8Array } {
  const mid = new Uint8Array(randomBytes(16));
  const inner = innerMap({ ...message, from: sender.aid, ksn: sender.ksn, to: to.aid, mid });
  const sig = sender.signer.sign(encodeCanonical(inner));
  const plaintext = padded(new Map([...inner, [20, sig]]));
  const { enc, ct } = seal(to.publicKey, info(to.aid, to.kid), new Uint8Array(), plaintext);
  const outer = new Map<number, CborValue>([[1, 1], [2, to.aid], [3, SUITE], [4, to.kid], [5, enc], [6, ct]]);
  return { bytes: encodeCanonical(outer), mid };
}

export interface OpenContext {
  me: string;
  /** Our encryption keys by hex kid. */
  keys: Map<string, X25519KeyPair>;
  now: number;
  /** True when this mid was seen before; records it (until `exp`) otherwise. */
  seen(mid: Uint8Array, exp: number): boolean | Promise<boolean>;
  /** The sender's KEL, extended by the tail it sent when that is valid; null when unknown. */
  kelOf(aid: string, tail: Uint8Array | undefined): KelState | null | Promise<KelState | null>;
}

/** The outer envelope's recipient, as the hub reads it (nothing else is in the clear). */
export function envelopeRecipient(bytes: Uint8Array): string {
  const outer = decodeCanonical(bytes);
  const to = outer instanceof Map ? outer.get(2) : undefined;
  if (typeof to !== 'string') throw new EnvelopeRefused('MALFORMED', 'the envelope names no recipient');
  return to;
}

export async function openEnvelope(bytes: Uint8Array, ctx: OpenContext): Promise<Received> {
  const outer = decode(bytes, 'envelope');
  const to = outer.get(2), kid = outer.get(4), enc = outer.get(5), ct = outer.get(6);
  if (outer.get(1) !== 1 || outer.get(3) !== SUITE || typeof to !== 'string' || !(kid instanceof Uint8Array) || kid.length !== 16 || !(enc instanceof Uint8Array) || !(ct instanceof Uint8Array)) {
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
  const signed = new Map([...inner].filter(([k]) => k !== 20 && k !== 21));
  const sig = inner.get(20);
  if (m.ksn !== kel.ksn || !(sig instanceof Uint8Array) || !verifyEd25519(kel.currentKey, encodeCanonical(signed), sig)) {
    throw new EnvelopeRefused('BAD_SIGNATURE', 'not signed by the sender\'s current key');
  }
  // Replay is checked last, so a forged copy cannot burn a genuine message's mid.
  if (await ctx.seen(m.mid, m.exp)) throw new EnvelopeRefused('REPLAYED', 'this message was already received');
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
