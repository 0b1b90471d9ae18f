// Byte-for-byte checks of large buffers. ava's deepEqual walks a Buffer element by element to be able to
// print a diff: on a 10 MiB buffer that is tens of seconds of CPU, enough to starve the other tests of
// the same process (the PostgreSQL ones then time out connecting). Buffer.equals is a memcmp.
import type { ExecutionContext } from 'ava';

/** Passes when `actual` holds exactly the bytes of `expected`; on a difference it names the first one. */
export function sameBytes(t: ExecutionContext, actual: Uint8Array, expected: Uint8Array, message = 'the same bytes'): void {
  const a = Buffer.from(actual.buffer, actual.byteOffset, actual.byteLength);
  const b = Buffer.from(expected.buffer, expected.byteOffset, expected.byteLength);
  if (a.equals(b)) {
    t.pass(message);
    return;
  }
  let at = 0;
  while (at < a.length && at < b.length && a[at] === b[at]) at++;
  t.fail(`${message}: ${a.length} bytes against ${b.length} expected, first difference at byte ${at}`);
}
