// Large buffers kept for the next pass over a file. A fresh 1 MiB buffer is 256 pages a process touches
// for the first time (~5-8 ms of page faults on the 2-core VMs measured), and `anet call` makes three
// passes over each file it sends (its address, its head, the rest), a daemon one per file it reads. A
// buffer is given back only once nothing reads it any more; a few of each size are kept, the rest left
// to the GC.

const free = new Map<number, Buffer[]>();
/** Buffers kept per size: as many as passes that run at once in one process, usually one. */
const KEEP = 2;
/**
 * Bytes kept in all: the passes over files use a few sizes (the chunk sizes a file may have, with and
 * without a tag: under 8 MiB at two of each), and no other use may make the pool grow past that.
 */
const KEEP_BYTES = 8 * 1024 * 1024;
let kept = 0;

/** A buffer of `size` bytes, its contents whatever they were: one given back, else a new one. */
export function takeBuffer(size: number): Buffer {
  const buf = free.get(size)?.pop();
  if (!buf) return Buffer.allocUnsafeSlow(size);
  kept -= buf.length;
  return buf;
}

/** Gives back a buffer `takeBuffer` gave (whole, not a view of it) once nothing reads it any more. */
export function giveBuffer(buf: Buffer): void {
  const same = free.get(buf.length) ?? [];
  if (same.length >= KEEP || kept + buf.length > KEEP_BYTES || same.includes(buf)) return;
  same.push(buf);
  free.set(buf.length, same);
  kept += buf.length;
}
