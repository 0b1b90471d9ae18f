// SPEC §2.1 (lists looked at for every decision) and §3.2 (the socket checked before sending): what one
// turn of the event loop decides shares one look at the file system (src/util/per-turn.ts).
import test from 'ava';
import { spawn } from 'node:child_process';
import { perTurn } from '../../src/util/per-turn.js';

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

test('SPEC §2.1, §3.2: one look per key in a turn; the next turn looks again', async (t) => {
  let looks = 0;
  const look = perTurn((key: string) => `${key}:${++looks}`);
  t.is(look('a'), 'a:1');
  t.is(look('a'), 'a:1', 'remembered within the turn');
  t.is(look('b'), 'b:2', 'by key');
  await nextTurn();
  t.is(look('a'), 'a:3', 'looked at again in the next turn');
  t.is(looks, 3);
});

test('SPEC §2.1, §3.2: a look is not remembered while the loop waits for what another process sends', async (t) => {
  let looks = 0;
  const look = perTurn(() => ++looks);
  // A peer that writes 200 ms from now: its bytes wake the loop from its wait for I/O, and their callback
  // runs before that wake-up's setImmediate callbacks. The end of the look's turn must come before the wait.
  const peer = spawn(process.execPath, ['-e', "setTimeout(() => process.stdout.write('x'), 200)"]);
  t.teardown(() => peer.kill());
  const later = await new Promise<number>((resolve) => {
    peer.stdout.once('data', () => resolve(look('x')));
    setImmediate(() => look('x'));
  });
  t.is(later, 2);
});
