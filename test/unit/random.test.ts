// WIRE §4 (message ids), SPEC §9 (task ids): random ids come from a pooled CSPRNG buffer; every draw is
// fresh bytes, across pool refills, and a buffer handed out is not overwritten by later draws.
import test from 'ava';
import { randomId, randomHex } from '../../src/util/random.js';

test('WIRE §4: pooled random ids are distinct across many pool refills and keep their bytes', (t) => {
  const seen = new Set<string>();
  const first = randomId(16);
  const copy = Buffer.from(first);
  for (let i = 0; i < 5000; i++) seen.add(randomId(16).toString('hex'));
  t.is(seen.size, 5000, 'no id repeats');
  t.deepEqual(first, copy, 'later draws do not touch a buffer already handed out');
  t.is(randomHex(8).length, 16);
  t.is(randomId(256).length, 256);
  t.throws(() => randomId(257), { message: /at most 256/ });
});
