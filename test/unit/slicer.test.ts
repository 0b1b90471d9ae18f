// SPEC §11 (the relay pushes to a connected node): a node takes the envelopes of one read from its push
// stream at most a slice per turn of its event loop, pausing the stream while the rest wait (Slicer in
// src/relay/client.ts), so a burst of calls is worked on in overlapping parts.
import test from 'ava';
import { Slicer } from '../../src/relay/client.js';

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

function source() {
  const log: string[] = [];
  return { log, pause: () => log.push('pause'), resume: () => log.push('resume') };
}

test('SPEC §11: 20 envelopes of one read go on 8, 8 and 4 in three turns, in order, the stream paused until the last left', async (t) => {
  const got: number[] = [];
  const src = source();
  const slicer = new Slicer<number>(8, (n) => got.push(n), src);
  for (let i = 0; i < 20; i++) slicer.push(i);
  t.deepEqual(got, [0, 1, 2, 3, 4, 5, 6, 7], 'the first slice at once');
  t.deepEqual(src.log, ['pause']);
  await nextTurn();
  t.is(got.length, 16);
  t.deepEqual(src.log, ['pause'], 'still paused while some wait');
  await nextTurn();
  t.deepEqual(
    got,
    Array.from({ length: 20 }, (_, i) => i),
  );
  t.deepEqual(src.log, ['pause', 'resume']);
});

test('SPEC §11: an envelope alone goes on at once, and a new turn has a whole slice again', async (t) => {
  const got: number[] = [];
  const src = source();
  const slicer = new Slicer<number>(8, (n) => got.push(n), src);
  slicer.push(1);
  t.deepEqual(got, [1]);
  for (let i = 2; i <= 8; i++) slicer.push(i);
  t.is(got.length, 8, 'eight in this turn');
  await nextTurn();
  for (let i = 9; i <= 16; i++) slicer.push(i);
  t.is(got.length, 16, 'eight more in the next');
  t.deepEqual(src.log, [], 'never paused: nothing had to wait');
});

test('SPEC §11: envelopes read while others wait queue behind them, never ahead', async (t) => {
  const got: number[] = [];
  const src = source();
  const slicer = new Slicer<number>(2, (n) => got.push(n), src);
  for (let i = 0; i < 5; i++) slicer.push(i);
  t.deepEqual(got, [0, 1]);
  await nextTurn();
  // A read that came in anyway (the pause takes effect only for later reads) waits its turn.
  slicer.push(5);
  t.deepEqual(got, [0, 1, 2, 3]);
  await nextTurn();
  await nextTurn();
  t.deepEqual(got, [0, 1, 2, 3, 4, 5]);
  t.deepEqual(src.log, ['pause', 'resume']);
});

test('SPEC §11: a handler that throws loses only its own envelope: the rest go on in later turns and the stream is resumed', async (t) => {
  const got: number[] = [];
  const src = source();
  const slicer = new Slicer<number>(
    4,
    (n) => {
      if (n === 2) throw new Error('bad 2');
      got.push(n);
    },
    src,
  );
  const thrown: string[] = [];
  for (let i = 0; i < 10; i++) {
    try {
      slicer.push(i);
    } catch (err) {
      thrown.push((err as Error).message);
    }
  }
  t.deepEqual(thrown, ['bad 2'], 'the throw reaches the reader of the stream, as before the slices');
  for (let i = 0; i < 3; i++) await nextTurn();
  t.deepEqual(got, [0, 1, 3, 4, 5, 6, 7, 8, 9]);
  t.deepEqual(src.log, ['pause', 'resume']);
});
