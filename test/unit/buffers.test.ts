// src/util/buffers.ts (issue 20): the buffers a pass over a file takes are given back for the next pass,
// a few of each size and 8 MiB in all, and one given back twice is kept once (two passes must never
// share one).
import test from 'ava';
import { giveBuffer, takeBuffer } from '../../src/util/buffers.js';

test('issue 20: a buffer given back is the one the next take of its size gets; at most two are kept per size; a double give keeps it once', (t) => {
  const size = 12_345;
  const a = takeBuffer(size);
  const b = takeBuffer(size);
  const c = takeBuffer(size);
  t.is(a.length, size);
  t.not(a, b, 'none kept yet: each take is a new buffer');
  giveBuffer(a);
  giveBuffer(a);
  t.is(takeBuffer(size), a, 'the one given back');
  t.not(takeBuffer(size), a, 'kept once, though given twice');
  giveBuffer(a);
  giveBuffer(b);
  giveBuffer(c);
  const again = [takeBuffer(size), takeBuffer(size), takeBuffer(size)];
  t.true(again.slice(0, 2).includes(a) && again.slice(0, 2).includes(b), 'the first two given back are kept');
  t.false(again.includes(c), 'a third is left to the GC');
  t.is(takeBuffer(size + 1).length, size + 1, 'sizes are kept apart');
});

test('issue 20: the pool keeps at most 8 MiB in all, whatever the sizes given back', (t) => {
  const MIB = 1024 * 1024;
  const big = [3 * MIB, 3 * MIB + 1, 3 * MIB + 2].map((n) => takeBuffer(n));
  for (const b of big) giveBuffer(b);
  t.is(takeBuffer(3 * MIB), big[0]!, 'the first is kept');
  t.is(takeBuffer(3 * MIB + 1), big[1]!, 'the second is kept');
  t.not(takeBuffer(3 * MIB + 2), big[2]!, 'the third would pass 8 MiB: left to the GC');
});
