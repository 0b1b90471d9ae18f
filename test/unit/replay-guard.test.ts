// WIRE §4, SPEC §11: the receiver's replay guard — a mid is refused the second time, also when both
// copies arrive at once, also after a restart (LevelDB), until its message expires.
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { tempDir } from '../helpers/tmp.js';
import { Store } from '../../store/db.js';
import { ReplayGuard } from '../../src/relay/replay-guard.js';

const mid = () => new Uint8Array(randomBytes(16));

test('WIRE §4: a mid is new once; copies arriving together, later, and after a restart are replays', async (t) => {
  const dir = await tempDir(t);
  let store = await Store.open(dir);
  t.teardown(() => store.close());
  let guard = new ReplayGuard(store);
  const exp = Date.now() + 60_000;
  const a = mid();
  // Two copies in the same turn, and 50 other messages with them (they share writes).
  const many = Array.from({ length: 50 }, mid);
  const first = await Promise.all([guard.seen(a, exp), guard.seen(a, exp), ...many.map((m) => guard.seen(m, exp))]);
  t.deepEqual(
    first,
    Array(52)
      .fill(false)
      .map((f, i) => (i === 1 ? true : f)),
  );
  t.true(await guard.seen(a, exp));
  // Every mid taken is on disk once `seen` answered: a restart still refuses each of them.
  await store.close();
  store = await Store.open(dir);
  guard = new ReplayGuard(store);
  t.true(await guard.seen(a, exp), 'read while the store is still opening');
  await store.mids.get('-');
  t.is(store.mids.status, 'open');
  t.deepEqual(await Promise.all(many.map((m) => guard.seen(m, exp))), Array(50).fill(true), 'read from the open store');
  t.false(await guard.seen(mid(), exp));
});

test('WIRE §4: mids are forgotten once their messages expired', async (t) => {
  const dir = await tempDir(t);
  const store = await Store.open(dir);
  t.teardown(() => store.close());
  const guard = new ReplayGuard(store);
  const now = Date.now();
  const [old, young] = [mid(), mid()];
  t.false(await guard.seen(old, now + 1_000));
  t.false(await guard.seen(young, now + 60_000));
  t.is(await guard.prune(now + 2_000), 1);
  t.is(await store.mids.get(Buffer.from(old).toString('hex')), undefined);
  t.true(await new ReplayGuard(store).seen(young, now + 60_000));
});

test('WIRE §4: a mid whose record cannot be written is not taken: the message is dropped, and a later copy is checked afresh', async (t) => {
  const dir = await tempDir(t);
  const store = await Store.open(dir);
  t.teardown(() => store.close());
  const guard = new ReplayGuard(store);
  const real = store.write.bind(store);
  let failures = 1;
  // The disk refuses one write (full, or failing): a real store, one injected fault.
  store.write = (...args) => (failures-- > 0 ? Promise.reject(new Error('disk full')) : real(...args));
  const exp = Date.now() + 60_000;
  const a = mid();
  await t.throwsAsync(guard.seen(a, exp), { message: 'disk full' }, 'not accepted without its record');
  t.false(await guard.seen(a, exp), 'once the disk takes writes again, the copy is new (nothing of it ran)');
  t.true(await guard.seen(a, exp), 'and now recorded');
});
