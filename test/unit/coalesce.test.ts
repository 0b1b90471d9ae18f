// PROTOCOL §6.10 (previews): a preview is a current status, so of a burst only the last goes, at most once
// per gap — on the provider's side (previews.ts) and again on the caller's (caller/index.ts).
import test from 'ava';
import { coalescer } from '../../src/util/coalesce.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('PROTOCOL §6.10: the first value goes at once, a burst within the gap goes as its last value, one gap later', async (t) => {
  const sent: number[] = [];
  const c = coalescer<number>(100, Date.now, (v) => sent.push(v));
  for (let i = 0; i < 50; i++) c.push(i);
  t.deepEqual(sent, [0]);
  await sleep(150);
  t.deepEqual(sent, [0, 49]);
  await sleep(150);
  c.push(50);
  t.deepEqual(sent, [0, 49, 50], 'a value after a quiet gap goes at once');
});

test('PROTOCOL §6.10: close drops a value still waiting; end sends it now; nothing goes after either', async (t) => {
  const closed: number[] = [];
  const a = coalescer<number>(100, Date.now, (v) => closed.push(v));
  a.push(1);
  a.push(2);
  a.close();
  a.push(3);
  await sleep(150);
  t.deepEqual(closed, [1]);
  const ended: number[] = [];
  const b = coalescer<number>(100, Date.now, (v) => ended.push(v));
  b.push(1);
  b.push(2);
  b.end();
  t.deepEqual(ended, [1, 2], 'the waiting value goes before whatever ended the stream');
  b.push(3);
  await sleep(150);
  t.deepEqual(ended, [1, 2]);
});

test('PROTOCOL §6.10: a clock that does not move still lets one value through per gap of real time', async (t) => {
  const sent: number[] = [];
  const c = coalescer<number>(
    50,
    () => 1_000,
    (v) => sent.push(v),
  );
  c.push(1);
  c.push(2);
  await sleep(80);
  c.push(3);
  t.deepEqual(sent, [1, 2], 'the second waited one gap; the third waits for the next');
  await sleep(80);
  t.deepEqual(sent, [1, 2, 3]);
});
