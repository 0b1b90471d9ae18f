// LevelDB's write-ahead log, checked by our own code before LevelDB opens it (issue 18, item 2).
//
// On open, LevelDB replays its `.log` file into a table and deletes the log. Its reader skips a record
// that fails its checksum *without an error* (paranoid_checks is off, and classic-level cannot turn it
// on), together with the rest of that record's 32 KiB block: a log of a few hundred synced batches is
// one or two blocks, so one flipped byte silently dropped every acknowledged batch after it, and once the
// log was replayed nothing was left to notice. So before LevelDB opens a store, every record of its logs
// is checked here: CRC32C over type and payload as LevelDB writes them (log_format.h), fragments in
// order. A damaged record refuses the open and leaves the directory untouched.
//
// What is not damage: the tail of a write that never finished. A process killed mid-write leaves a last
// record that runs past the end of the file (or a fragment without its end); a power loss can leave the
// last record's unwritten pages as zeros, and preallocated zeros after it. That batch's fsync had not
// returned, so no sender was told it was stored: LevelDB drops it and so do we. A record that is whole
// and fails its checksum is damage, wherever it is: it was written complete, and may have been
// acknowledged. A length field whose record "runs past the end" while a shorter length matches its
// checksum is damage too (a flipped length byte, not a torn write).
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

const BLOCK = 32768;
const HEADER = 7;
const PAGE = 4096;
const FULL = 1;
const FIRST = 2;
const MIDDLE = 3;
const LAST = 4;

/** CRC32C (Castagnoli), slicing by 8: LevelDB's record checksum. */
const T = (() => {
  const t = new Int32Array(8 * 256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
    t[n] = c;
  }
  for (let n = 0; n < 256; n++) {
    let c = t[n]!;
    for (let k = 1; k < 8; k++) {
      c = t[c & 0xff]! ^ (c >>> 8);
      t[k * 256 + n] = c;
    }
  }
  return t;
})();

/** Extends a running CRC32C (pre- and post-inverted, as `crc32c(0, ...)` starts) over buf[start, end). */
export function crc32c(crc: number, buf: Uint8Array, start = 0, end = buf.length): number {
  let c = ~crc;
  let i = start;
  for (; i + 8 <= end; i += 8) {
    const a = c ^ (buf[i]! | (buf[i + 1]! << 8) | (buf[i + 2]! << 16) | (buf[i + 3]! << 24));
    c =
      T[7 * 256 + (a & 0xff)]! ^
      T[6 * 256 + ((a >>> 8) & 0xff)]! ^
      T[5 * 256 + ((a >>> 16) & 0xff)]! ^
      T[4 * 256 + (a >>> 24)]! ^
      T[3 * 256 + buf[i + 4]!]! ^
      T[2 * 256 + buf[i + 5]!]! ^
      T[256 + buf[i + 6]!]! ^
      T[buf[i + 7]!]!;
  }
  for (; i < end; i++) c = T[(c ^ buf[i]!) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}

/** LevelDB stores checksums masked (crc32c.h). */
const mask = (crc: number) => ((((crc >>> 15) | (crc << 17)) >>> 0) + 0xa282ead8) >>> 0;

export interface WalDamage {
  /** The log file, relative to the LevelDB directory. */
  file: string;
  /** Where the damaged record's header starts. */
  offset: number;
  problem: string;
  /** The first journal seq or ledger history entry the damaged record holds, as far as its bytes tell. */
  holds: string | null;
}

/**
 * Checks every record of the LevelDB directory's logs; the first damage found, or null. The logs are
 * read whole: LevelDB starts a new one once its write buffer holds 16 MiB (store/db.ts), or a little more
 * after one large write (a hub's envelope of up to 16 MiB: ~32 MiB at most), so this costs up to ~170 ms
 * for a full log, a few milliseconds for a fresh one.
 * Every `.log` present is read: LevelDB deletes the ones it no longer needs at open and after each
 * flush, so an older one is only there briefly (after a crash between a flush and the delete).
 */
export async function checkWriteAheadLog(dir: string): Promise<WalDamage | null> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return null;
  }
  const logs = names.filter((n) => /^[0-9]+\.log$/.test(n)).sort((a, b) => parseInt(a, 10) - parseInt(b, 10));
  for (const name of logs) {
    const damage = scan(await readFile(join(dir, name)));
    if (damage) return { file: name, ...damage };
  }
  return null;
}

/** The first damaged record of one log's bytes, or null. */
export function scan(buf: Buffer): Omit<WalDamage, 'file'> | null {
  const n = buf.length;
  let fragmentStart = -1;
  const damaged = (offset: number, problem: string, end: number) => ({
    offset,
    problem,
    holds: holds(buf, fragmentStart >= 0 ? fragmentStart : offset, end),
  });
  for (let block = 0; block < n; block += BLOCK) {
    const blockEnd = Math.min(block + BLOCK, n);
    let off = block;
    // Fewer than a header's bytes left: the writer padded the block (with zeros; LevelDB never reads them).
    while (blockEnd - off >= HEADER) {
      const stored = buf.readUInt32LE(off);
      const length = buf.readUInt16LE(off + 4);
      const type = buf[off + 6]!;
      const end = off + HEADER + length;
      if (type === 0 && length === 0) {
        // LevelDB skips the rest of the block without a word. Zeros to the end of the file are space the
        // file system allocated and never wrote (a power loss): the end of the log.
        if (stored === 0 && lastNonZero(buf, off) < off) return null;
        return damaged(off, 'a zero record header inside written data', n);
      }
      if (end > blockEnd) {
        if (blockEnd < n) return damaged(off, 'a record length that runs past its block', blockEnd);
        // Runs past the end of the file: a write cut short, unless a shorter length matches the checksum.
        if (shorterMatch(buf, off, stored)) return damaged(off, 'a damaged record length', n);
        return null;
      }
      if (mask(crc32c(0, buf, off + 6, end)) !== stored) {
        if (tornByPowerLoss(buf, off, end)) return null;
        return damaged(off, 'a record that fails its checksum', end);
      }
      if (type === FULL || type === FIRST) {
        if (fragmentStart >= 0) return damaged(off, 'a fragmented record without its end', end);
        if (type === FIRST) fragmentStart = off;
      } else if (type === MIDDLE || type === LAST) {
        if (fragmentStart < 0) return damaged(off, 'a fragment without its start', end);
        if (type === LAST) fragmentStart = -1;
      } else {
        return damaged(off, `an unknown record type ${type}`, end);
      }
      off = end;
    }
  }
  // A fragmented record without its last fragment at the end of the file: the writer died between them.
  return null;
}

function lastNonZero(buf: Buffer, from: number): number {
  for (let i = buf.length - 1; i >= from; i--) if (buf[i] !== 0) return i;
  return from - 1;
}

/**
 * A last record whose checksum fails because a power loss kept only its first pages: everything after
 * it is zeros, and its own bytes are zeros from a page boundary on. One flipped byte does not look so.
 */
function tornByPowerLoss(buf: Buffer, off: number, end: number): boolean {
  const z = lastNonZero(buf, off);
  if (z >= end) return false;
  const page = Math.ceil((z + 1) / PAGE) * PAGE;
  return page > off + HEADER && page < end;
}

/** Whether the checksum matches the type and payload at some length short of the declared one. */
function shorterMatch(buf: Buffer, off: number, stored: number): boolean {
  let crc = crc32c(0, buf, off + 6, off + HEADER);
  if (mask(crc) === stored) return true;
  for (let i = off + HEADER; i < buf.length; i++) {
    crc = crc32c(crc, buf, i, i + 1);
    if (mask(crc) === stored) return true;
  }
  return false;
}

const JOURNAL = Buffer.from('!journal!');
const HISTORY = Buffer.from('!history!');
const SEQ_DIGITS = 16;

/** The first journal seq (the node) or ledger history entry (the hub) named by a key in buf[start, end). */
function holds(buf: Buffer, start: number, end: number): string | null {
  let first = Infinity;
  for (let i = buf.indexOf(JOURNAL, start); i >= 0 && i < end; i = buf.indexOf(JOURNAL, i + 1)) {
    const digits = buf.toString('latin1', i + JOURNAL.length, i + JOURNAL.length + SEQ_DIGITS);
    if (/^[0-9]{16}$/.test(digits)) first = Math.min(first, Number(digits));
  }
  if (first !== Infinity) return `journal #${first}`;
  const i = buf.indexOf(HISTORY, start);
  if (i >= 0 && i < end) {
    const m = /^([A-Za-z0-9_-]+)!([0-9]{16})/.exec(buf.toString('latin1', i + HISTORY.length, Math.min(end, i + HISTORY.length + 200)));
    if (m) return `the ledger history of ${m[1]} at seq ${Number(m[2])}`;
  }
  return null;
}
