// WIRE §4, SPEC §11: the receiver's replay guard — a mid is refused the second time, also when both
// copies arrive at once, also after a restart (LevelDB) once its handling was committed, until its
// message expires.
import test, { type ExecutionContext } from 'ava';
import { randomBytes } from 'node:crypto';
import { tempDir } from '../helpers/tmp.js';
import { Store, timeKey } from '../../store/db.js';
import { ReplayGuard } from '../../src/relay/replay-guard.js';

const mid = () => new Uint8Array(randomBytes(16));

/** A store in a temporary directory (closed after the test) and a guard on it. */
async function guardIn(t: ExecutionContext): Promise<{ store: Store; guard: ReplayGuard }> {
  const store = await Store.open(await tempDir(t));
  t.teardown(() => store.close());
  return { store, guard: new ReplayGuard(store) };
}

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
  t.is(await store.mids.get(Buffer.from(a).toString('hex')), undefined, 'nothing is written before the handling is done');
  // Every mid whose handling was done is on disk once commit() (before the acknowledgements) resolved: a
  // restart still refuses each of them.
  for (const m of [a, ...many]) guard.done(m);
  await guard.commit();
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
  const { store, guard } = await guardIn(t);
  const now = Date.now();
  const [old, young] = [mid(), mid()];
  t.false(await guard.seen(old, now + 1_000));
  t.false(await guard.seen(young, now + 60_000));
  guard.done(old);
  guard.done(young);
  await guard.commit();
  t.is(await guard.prune(now + 2_000), 1);
  t.is(await store.mids.get(Buffer.from(old).toString('hex')), undefined);
  t.true(await new ReplayGuard(store).seen(young, now + 60_000));
});

test('WIRE §4: a mid whose record cannot be written stays a replay while the node runs, and the next commit writes it', async (t) => {
  const { store, guard } = await guardIn(t);
  const real = store.write.bind(store);
  let failures = 1;
  // The disk refuses one write (full, or failing): a real store, one injected fault.
  store.write = (...args) => (failures-- > 0 ? Promise.reject(new Error('disk full')) : real(...args));
  const exp = Date.now() + 60_000;
  const a = mid();
  t.false(await guard.seen(a, exp));
  guard.done(a);
  // The acknowledgement waits for this commit: failed, no acknowledgement leaves, the hub keeps the envelope.
  await t.throwsAsync(guard.commit(), { message: 'disk full' });
  t.true(await guard.seen(a, exp), 'a copy meanwhile is a replay');
  await guard.commit();
  t.is(await store.mids.get(Buffer.from(a).toString('hex')), exp, 'written by the next commit');
  t.true(await new ReplayGuard(store).seen(a, exp), 'and so a replay for a guard started afresh too');
});

test('WIRE §4: a mid released by a failed handler is taken again, and never written', async (t) => {
  const { store, guard } = await guardIn(t);
  const exp = Date.now() + 60_000;
  const a = mid();
  t.false(await guard.seen(a, exp));
  t.true(await guard.seen(a, exp));
  guard.release(a);
  await guard.commit();
  t.is(await store.mids.get(Buffer.from(a).toString('hex')), undefined);
  t.false(await guard.seen(a, exp), 'the copy the hub pushes again is handled afresh');
});

test('WIRE §4: commits are written in order: one asked for after done() resolves only once that mid is on disk', async (t) => {
  const { store, guard } = await guardIn(t);
  const real = store.write.bind(store);
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  let first = true;
  // The first commit's write is held back; a second commit must not overtake it.
  store.write = async (...args) => {
    if (first) {
      first = false;
      await held;
    }
    return real(...args);
  };
  const exp = Date.now() + 60_000;
  const [a, b] = [mid(), mid()];
  t.false(await guard.seen(a, exp));
  guard.done(a);
  const one = guard.commit();
  t.false(await guard.seen(b, exp));
  guard.done(b);
  let twoDone = false;
  const two = guard.commit().then(() => (twoDone = true));
  await new Promise((r) => setTimeout(r, 50));
  t.false(twoDone, 'the second commit waits for the first');
  release();
  await Promise.all([one, two]);
  for (const m of [a, b]) t.is(await store.mids.get(Buffer.from(m).toString('hex')), exp);
});

test('WIRE §4: mids an earlier guard left pending (handling never durable) are forgotten at start, so their messages are taken again', async (t) => {
  const dir = await tempDir(t);
  const store = await Store.open(dir);
  t.teardown(() => store.close());
  const exp = Date.now() + 60_000;
  const ts = exp - 30_000;
  const a = mid();
  const key = Buffer.from(a).toString('hex');
  // The records the guard before this one wrote as it took a message: the mid, its indexes, and the mark.
  await store.write([
    { type: 'put', sublevel: store.mids, key, value: exp },
    { type: 'put', sublevel: store.mids, key: `~${timeKey(exp)}!${key}`, value: ts },
    { type: 'put', sublevel: store.mids, key: `~t${timeKey(ts)}!${key}`, value: exp },
    { type: 'put', sublevel: store.mids, key: `~p${key}`, value: 1 },
  ]);
  const guard = new ReplayGuard(store);
  t.is(await guard.recover(), 1);
  t.deepEqual(await store.mids.keys().all(), [], 'the mid, both its indexes and its mark are gone');
  t.false(await guard.seen(a, exp, ts));
});
