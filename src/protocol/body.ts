// Message bodies are CBOR maps with text keys (WIRE §4 key 9); these turn them into plain records and back.
import type { CborValue } from '../identity/cbor.js';

export function toBody(fields: Record<string, CborValue | undefined>): Map<string, CborValue> {
  return new Map(Object.entries(fields).filter((e): e is [string, CborValue] => e[1] !== undefined));
}

/** The body's fields, or null when it is not a map with text keys. */
export function fromBody(body: CborValue): Record<string, CborValue> | null {
  if (!(body instanceof Map)) return null;
  const out: Record<string, CborValue> = {};
  for (const [k, v] of body) {
    if (typeof k !== 'string') return null;
    out[k] = v;
  }
  return out;
}
