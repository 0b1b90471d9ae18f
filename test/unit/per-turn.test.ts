// SPEC §2.1 (lists looked at for every decision) and §3.2 (the socket checked before sending): what one
// turn of the event loop decides shares one look at the file system (src/util/per-turn.ts).
import test from 'ava';
import { perTurn } from '../../src/util/per-turn.js';

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

test('SPEC §2.1, §3.2: one look per key in a turn; the next turn looks again', async (t) => {
  let looks = 0;
  const memo = perTurn((key: string) => `${key}:${++looks}`);
  t.is(memo.look('a'), 'a:1');
  t.is(memo.look('a'), 'a:1', 'remembered within the turn');
  t.is(memo.look('b'), 'b:2', 'by key');
  await nextTurn();
  t.is(memo.look('a'), 'a:3', 'looked at again in the next turn');
  t.is(looks, 3);
});

test('SPEC §2.1: forget makes the next look fresh within the same turn', (t) => {
  let looks = 0;
  const memo = perTurn(() => ++looks);
  t.is(memo.look('x'), 1);
  memo.forget();
  t.is(memo.look('x'), 2);
});
