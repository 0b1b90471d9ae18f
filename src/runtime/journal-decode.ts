// Reading journal entries for replay: a decoder for the plain msgpack the store codec writes for them
// (maps with ASCII string keys, ASCII strings, numbers, booleans, null, arrays, msgpackr's `undefined`),
// giving exactly what the codec's msgpackr decodes, with fewer allocations: short strings (keys, kinds,
// event types, actor ids) come from a cache, so repeated ones are one string each and map lookups by
// them hash once. Anything else in an entry (binary, bigint, float32, extensions, non-ASCII text, a
// `__proto__` key, a truncated or overlong buffer) is decoded by the codec itself, whole.
// bench/step-equivalence.ts checks both decoders agree on random values. Why it stays (issue 24 asked
// whether it pays): decoding alone is no faster than msgpackr (~1M entries/s each here), but replay is
// ~8% faster with it (bench/replay, median of 9 rounds: 145k against 134k events/s of CPU), as the
// repeated strings are one string each: less garbage, and map lookups by them hash once.
import { endianness } from 'node:os';
import { unpack } from '../../store/codec.js';

/** Thrown inside this decoder for anything it leaves to msgpackr. */
const OTHER = new Error('not a plain journal value');

const EMPTY = new Uint8Array(0);
let src: Uint8Array = EMPTY;
let pos = 0;
let end = 0;

const f64 = new Float64Array(1);
const f64Bytes = new Uint8Array(f64.buffer);
const littleEndian = endianness() === 'LE';

const CACHE_BITS = 14;
const cache: (string | undefined)[] = new Array(1 << CACHE_BITS).fill(undefined);
const CACHED_MAX = 16;
const fromCharCode = String.fromCharCode;

/** An ASCII string of up to CACHED_MAX bytes at `start` (built, not cached). */
function shortString(start: number, length: number): string {
  const b = src;
  switch (length) {
    case 0:
      return '';
    case 1:
      return fromCharCode(b[start]!);
    case 2:
      return fromCharCode(b[start]!, b[start + 1]!);
    case 3:
      return fromCharCode(b[start]!, b[start + 1]!, b[start + 2]!);
    case 4:
      return fromCharCode(b[start]!, b[start + 1]!, b[start + 2]!, b[start + 3]!);
    case 5:
      return fromCharCode(b[start]!, b[start + 1]!, b[start + 2]!, b[start + 3]!, b[start + 4]!);
    case 6:
      return fromCharCode(b[start]!, b[start + 1]!, b[start + 2]!, b[start + 3]!, b[start + 4]!, b[start + 5]!);
    case 7:
      return fromCharCode(b[start]!, b[start + 1]!, b[start + 2]!, b[start + 3]!, b[start + 4]!, b[start + 5]!, b[start + 6]!);
    case 8:
      return fromCharCode(
        b[start]!,
        b[start + 1]!,
        b[start + 2]!,
        b[start + 3]!,
        b[start + 4]!,
        b[start + 5]!,
        b[start + 6]!,
        b[start + 7]!,
      );
    default:
      return (b as Buffer).toString('latin1', start, start + length);
  }
}

function ascii(length: number): string {
  if (length > end - pos) throw OTHER;
  const start = pos;
  const stop = start + length;
  const b = src;
  if (length > CACHED_MAX) {
    for (let i = start; i < stop; i++) if (b[i]! >= 0x80) throw OTHER;
    pos = stop;
    return (b as Buffer).toString('latin1', start, stop);
  }
  let h = length;
  for (let i = start; i < stop; i++) {
    const c = b[i]!;
    if (c >= 0x80) throw OTHER;
    h = (Math.imul(h, 31) + c) | 0;
  }
  pos = stop;
  const slot = (h ^ (h >>> CACHE_BITS)) & ((1 << CACHE_BITS) - 1);
  const hit = cache[slot];
  if (hit !== undefined && hit.length === length) {
    let i = 0;
    while (i < length && hit.charCodeAt(i) === b[start + i]) i++;
    if (i === length) return hit;
  }
  const s = shortString(start, length);
  cache[slot] = s;
  return s;
}

function need(n: number): void {
  if (n > end - pos) throw OTHER;
}

function map(size: number): Record<string, unknown> {
  const obj: Record<string, unknown> = {};
  for (let i = 0; i < size; i++) {
    need(1);
    const b = src[pos++]!;
    let key: string;
    if (b >= 0xa0 && b < 0xc0) key = ascii(b & 0x1f);
    else if (b === 0xd9) {
      need(1);
      key = ascii(src[pos++]!);
    } else throw OTHER;
    // msgpackr renames this key (so a decoded object never gets a prototype from the data).
    if (key === '__proto__') throw OTHER;
    obj[key] = read();
  }
  return obj;
}

function array(size: number): unknown[] {
  const arr = new Array<unknown>(size);
  for (let i = 0; i < size; i++) arr[i] = read();
  return arr;
}

function read(): unknown {
  need(1);
  const b = src[pos++]!;
  if (b < 0x80) return b;
  if (b < 0x90) return map(b & 0x0f);
  if (b < 0xa0) return array(b & 0x0f);
  if (b < 0xc0) return ascii(b & 0x1f);
  if (b >= 0xe0) return b - 0x100;
  switch (b) {
    case 0xc0:
      return null;
    case 0xc2:
      return false;
    case 0xc3:
      return true;
    case 0xcb: {
      need(8);
      if (littleEndian) for (let i = 0; i < 8; i++) f64Bytes[i] = src[pos + 7 - i]!;
      else for (let i = 0; i < 8; i++) f64Bytes[i] = src[pos + i]!;
      pos += 8;
      return f64[0];
    }
    case 0xcc:
      need(1);
      return src[pos++];
    case 0xcd:
      need(2);
      pos += 2;
      return (src[pos - 2]! << 8) | src[pos - 1]!;
    case 0xce:
      need(4);
      pos += 4;
      return ((src[pos - 4]! << 24) | (src[pos - 3]! << 16) | (src[pos - 2]! << 8) | src[pos - 1]!) >>> 0;
    case 0xd0:
      need(1);
      return (src[pos++]! << 24) >> 24;
    case 0xd1:
      need(2);
      pos += 2;
      return (((src[pos - 2]! << 8) | src[pos - 1]!) << 16) >> 16;
    case 0xd2:
      need(4);
      pos += 4;
      return (src[pos - 4]! << 24) | (src[pos - 3]! << 16) | (src[pos - 2]! << 8) | src[pos - 1]!;
    case 0xd4:
      // msgpackr's `undefined`: fixext 1, type 0, data 0.
      need(2);
      if (src[pos] !== 0 || src[pos + 1] !== 0) throw OTHER;
      pos += 2;
      return undefined;
    case 0xd9:
      need(1);
      return ascii(src[pos++]!);
    case 0xda:
      need(2);
      pos += 2;
      return ascii((src[pos - 2]! << 8) | src[pos - 1]!);
    case 0xdc:
      need(2);
      pos += 2;
      return array((src[pos - 2]! << 8) | src[pos - 1]!);
    case 0xde:
      need(2);
      pos += 2;
      return map((src[pos - 2]! << 8) | src[pos - 1]!);
    default:
      throw OTHER;
  }
}

/** How many values were left to msgpackr (for tests). */
export const decodeStats = { values: 0, others: 0 };

/** What `store/codec.ts`'s `unpack(buffer)` returns for `buffer` (errors included: they are msgpackr's). */
export function decodeValue(buffer: Uint8Array): unknown {
  decodeStats.values++;
  if (!Buffer.isBuffer(buffer)) {
    decodeStats.others++;
    return unpack(buffer);
  }
  src = buffer;
  pos = 0;
  end = buffer.length;
  try {
    const value = read();
    if (pos === end) return value;
  } catch (err) {
    if (err !== OTHER) throw err;
  } finally {
    src = EMPTY;
  }
  decodeStats.others++;
  return unpack(buffer);
}
