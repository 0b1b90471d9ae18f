// SPEC §14 (the store): grouped unsynced writes — the replay guard's mids and the caller's task records
// share LevelDB batches, land in the order they were queued, and a failed batch fails only its own ops.
import test from 'ava';
import { Store } from '../store/db.js';
import { tempDir } from './helpers/tmp.js';

async function openCounting(t: Parameters<typeof tempDir>[0]) {
  const store = await Store.open(await tempDir(t));
  t.teardown(() => store.close());
  const batches: number[] = [];
  const write = store.write.bind(store);
  store.write = (ops, opts) => (batches.push(ops.length), write(ops, opts));
  return { store, batches };
}

test('SPEC §14: writes queued while a grouped write is under way share the next batch, and the last queued value wins', async (t) => {
  const { store, batches } = await openCounting(t);
  const put = (key: string, value: unknown) => store.writeGrouped([{ type: 'put', sublevel: store.tasks, key, value }]);
  const writes = Array.from({ length: 50 }, (_, i) => put('task-a', i));
  writes.push(put('task-b', 'b'));
  await Promise.all(writes);
  t.deepEqual(batches, [1, 50], 'the first write went at once, the 50 queued behind it in one batch');
  t.is(await store.tasks.get('task-a'), 49);
  t.is(await store.tasks.get('task-b'), 'b');
  // Idle again: the next write is issued at once, alone.
  await put('task-a', 'later');
  t.deepEqual(batches, [1, 50, 1]);
  t.is(await store.tasks.get('task-a'), 'later');
});

test('SPEC §14: a grouped write that fails rejects its own ops only; the group after it lands', async (t) => {
  const { store } = await openCounting(t);
  const write = store.write.bind(store);
  let failures = 1;
  store.write = (ops, opts) => (failures-- > 0 ? Promise.reject(new Error('disk full')) : write(ops, opts));
  const put = (key: string) => store.writeGrouped([{ type: 'put', sublevel: store.tasks, key, value: key }]);
  const first = put('one');
  const second = put('two');
  await t.throwsAsync(first, { message: 'disk full' });
  await second;
  t.is(await store.tasks.get('one'), undefined);
  t.is(await store.tasks.get('two'), 'two');
});

test('SPEC §14: closing the store waits for the grouped writes queued before it', async (t) => {
  const dir = await tempDir(t);
  const store = await Store.open(dir);
  const put = (value: string) => store.writeGrouped([{ type: 'put', sublevel: store.tasks, key: 't1', value }]);
  const writes = [put('submitted'), put('completed')];
  await store.close();
  await Promise.all(writes);
  const again = await Store.open(dir);
  t.teardown(() => again.close());
  t.is(await again.tasks.get('t1'), 'completed', 'the second group, queued behind the first, landed before the close');
});

test('SPEC §14: a batch under way when the store closes lands; a write after the close is refused, never lost quietly', async (t) => {
  const dir = await tempDir(t);
  const store = await Store.open(dir);
  const ops = Array.from({ length: 200 }, (_, i) => ({ type: 'put' as const, sublevel: store.journal, key: String(i).padStart(4, '0'), value: { i, pad: 'x'.repeat(500) } }));
  const landing = store.write(ops, { sync: true });
  await store.close();
  await landing;
  await t.throwsAsync(store.write([ops[0]!]), { code: 'LEVEL_DATABASE_NOT_OPEN' });
  const again = await Store.open(dir);
  t.teardown(() => again.close());
  t.deepEqual(await again.journal.get('0199'), { i: 199, pad: 'x'.repeat(500) });
  t.is((await again.journal.keys().all()).length, 200);
});
