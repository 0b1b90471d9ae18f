// Large buffers kept for the next pass over a file. A fresh 1 MiB buffer is 256 pages a process touches
// for the first time (~5-8 ms of page faults on the 2-core VMs measured), and `anet call` makes three
// passes over each file it sends (its address, its head, the rest), a daemon one per file it reads. A
// buffer is given back only once nothing reads it any more; a few of each size are kept, the rest left
// to the GC.

const free = new Map<number, Buffer[]>();
/** Buffers kept per size: as many as passes that run at once in one process, usually one. */
const KEEP = 2;

/** A buffer of `size` bytes, its contents whatever they were: one given back, else a new one. */
export function takeBuffer(size: number): Buffer {
  return free.get(size)?.pop() ?? Buffer.allocUnsafeSlow(size);
}

/** Gives back a buffer `takeBuffer` gave (whole, not a view of it) once nothing reads it any more. */
export function giveBuffer(buf: Buffer): void {
  const kept = free.get(buf.length) ?? [];
  free.set(buf.length, kept);
  if (kept.length < KEEP && !kept.includes(buf)) kept.push(buf);
}
