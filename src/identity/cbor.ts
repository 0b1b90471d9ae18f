// Deterministic CBOR (WIRE.md §1): RFC 8949 §4.2 core deterministic encoding through cborg.
// Decoding is strict, and anything that does not re-encode to the same bytes is refused.
import { encode, decode, rfc8949EncodeOptions } from 'cborg';

export class CborError extends Error {
  override name = 'CborError';
}

export type CborValue = number | bigint | string | boolean | null | Uint8Array | CborValue[] | Map<number | string, CborValue>;

/**
 * cborg's default map sorter orders keys by major type, integers by value, and strings and byte strings
 * by length then bytes: RFC 8949's bytewise order of the encoded keys, for every key that is not an
 * array or a map. It also keeps cborg's direct encoder, where rfc8949EncodeOptions takes the token path
 * and encodes each key again for every comparison (~30 µs an envelope, several envelopes a call). Array
 * and map keys are compared by their count only by the default sorter, so a value with one goes the
 * RFC 8949 way.
 */
export function encodeCanonical(value: unknown): Uint8Array {
  return hasCompoundKey(value) ? encode(value, rfc8949EncodeOptions) : encode(value);
}

function hasCompoundKey(value: unknown): boolean {
  if (typeof value !== 'object' || value === null || value instanceof Uint8Array) return false;
  if (value instanceof Map) {
    for (const [k, v] of value) if (isCompound(k) || hasCompoundKey(v)) return true;
    return false;
  }
  if (Array.isArray(value)) return value.some(hasCompoundKey);
  return Object.values(value).some(hasCompoundKey);
}

const isCompound = (key: unknown) => typeof key === 'object' && key !== null && !(key instanceof Uint8Array);

const strictDecode = {
  strict: true,
  useMaps: true,
  rejectDuplicateMapKeys: true,
  allowIndefinite: false,
  allowUndefined: false,
  allowNaN: false,
  allowInfinity: false,
  tags: [],
} as const;

/** Well-formed CBOR with shortest-form heads and no duplicate keys; the key order is not checked. */
export function decodeStrict(bytes: Uint8Array): CborValue {
  try {
    return decode(bytes, strictDecode) as CborValue;
  } catch (err) {
    throw new CborError(`not valid CBOR: ${(err as Error).message}`);
  }
}

export function decodeCanonical(bytes: Uint8Array): CborValue {
  const value = decodeStrict(bytes);
  if (!bytesEqual(encodeCanonical(value), bytes)) {
    throw new CborError('CBOR is not in deterministic (CoreDet) form');
  }
  return value;
}

/** A CoreDet CBOR map, or null when the bytes are not one (for checks that answer "invalid", not throw). */
export function decodeMap(bytes: Uint8Array): Map<CborValue, CborValue> | null {
  try {
    const value = decodeCanonical(bytes);
    return value instanceof Map ? value : null;
  } catch {
    return null;
  }
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.compare(a, b) === 0;
}
