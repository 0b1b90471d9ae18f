// SPEC §14 (the store): grouped unsynced writes — the replay guard's mids and the caller's task records
// share LevelDB batches, land in the order they were queued, and a failed batch fails only its own ops;
// the journal's hash chain (store/chain.ts) as Store.write links event batches.
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { Store, seqKey } from '../../store/db.js';
import { linkHash, ZERO_HASH } from '../../store/chain.js';
import { tempDir } from '../helpers/tmp.js';

async function openCounting(t: Parameters<typeof tempDir>[0]) {
  const store = await Store.open(await tempDir(t));
  t.teardown(() => store.close());
  const batches: number[] = [];
  const write = store.write.bind(store);
  store.write = (ops, opts) => {
    batches.push(ops.length);
    return write(ops, opts);
  };
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
  const ops = Array.from({ length: 200 }, (_, i) => ({
    type: 'put' as const,
    sublevel: store.journal,
    key: String(i).padStart(4, '0'),
    value: { i, pad: 'x'.repeat(500) },
  }));
  const landing = store.write(ops, { sync: true });
  await store.close();
  await landing;
  await t.throwsAsync(store.write([ops[0]!]), { code: 'LEVEL_DATABASE_NOT_OPEN' });
  const again = await Store.open(dir);
  t.teardown(() => again.close());
  t.deepEqual(await again.journal.get('0199'), { i: 199, pad: 'x'.repeat(500) });
  t.is((await again.journal.keys().all()).length, 200);
});

test('SPEC §14: linked journal batches chain by their stored bytes; a batch that does not continue the chain is refused, and a failed write leaves the head where it was', async (t) => {
  const dir = await tempDir(t);
  let store = await Store.open(dir);
  const entry = (seq: number) => ({
    type: 'put' as const,
    sublevel: store.journal,
    key: seqKey(seq),
    value: { seq, actor: 'a', kind: 'bucket', event: { type: 'ADMIT', at: seq } },
  });
  await store.write([entry(1), entry(2)], { link: true });
  t.is(store.chainStart, 1);
  await t.throwsAsync(store.write([entry(4)], { link: true }), { message: /does not continue the chain at #3/ });
  await t.throwsAsync(store.write([entry(3), entry(5)], { link: true }), { message: /does not continue the chain/ });
  const db = store.db as unknown as { _batch: (ops: unknown, o: unknown) => Promise<void> };
  const real = db._batch.bind(db);
  db._batch = () => Promise.reject(new Error('disk full'));
  await t.throwsAsync(store.write([entry(3)], { link: true }), { message: 'disk full' });
  db._batch = real;
  await store.write([entry(3)], { link: true });
  await store.close();

  store = await Store.open(dir);
  t.teardown(() => store.close());
  const bytes = (await store.journal.values({ valueEncoding: 'buffer' }).all()) as Buffer[];
  const links = (await store.chain.iterator().all()) as [string, { from: number; h: Uint8Array }][];
  const first = linkHash(ZERO_HASH, bytes.slice(0, 2));
  t.deepEqual(
    links.map(([key, v]) => [key, v.from, Buffer.from(v.h).toString('hex')]),
    [
      [seqKey(2), 1, first.toString('hex')],
      [seqKey(3), 3, linkHash(first, bytes.slice(2)).toString('hex')],
    ],
  );
  t.is(await store.meta.get('chain'), 1);
});

test('SPEC §14: a write asked to be synced reaches LevelDB with sync on, and its values are stored as packed once (the root _batch() given stored forms)', async (t) => {
  const store = await Store.open(await tempDir(t));
  t.teardown(() => store.close());
  // The spy reads what the store hands to classic-level: the options it fsyncs by, and the ops.
  const db = store.db as unknown as { _batch: (ops: { key: string }[], o: { sync?: boolean }) => Promise<void> };
  const real = db._batch.bind(db);
  const seen: { sync: boolean; keys: string[] }[] = [];
  db._batch = (ops, o) => {
    seen.push({ sync: o.sync === true, keys: ops.map((op) => op.key) });
    return real(ops, o);
  };
  await store.write([{ type: 'put', sublevel: store.tasks, key: 'a', value: { n: 1n, s: 'x' } }], { sync: true });
  await store.write([
    { type: 'put', sublevel: store.tasks, key: 'b', value: [1, 2] },
    { type: 'del', sublevel: store.tasks, key: 'a' },
  ]);
  t.deepEqual(seen, [
    { sync: true, keys: [store.tasks.prefixKey('a', 'utf8')] },
    { sync: false, keys: [store.tasks.prefixKey('b', 'utf8'), store.tasks.prefixKey('a', 'utf8')] },
  ]);
  t.deepEqual(await store.tasks.get('b'), [1, 2]);
  t.is(await store.tasks.get('a'), undefined);
  await store.write([{ type: 'put', sublevel: store.tasks, key: 'c', value: { n: 1n } }], { sync: true });
  t.deepEqual(await store.tasks.get('c'), { n: 1n }, 'read back through the sublevel: packed once, not twice');
});

test('SPEC §14: a write to a closed store is refused (LEVEL_DATABASE_NOT_OPEN) and writes nothing', async (t) => {
  const dir = await tempDir(t);
  const store = await Store.open(dir);
  await store.write([{ type: 'put', sublevel: store.tasks, key: 'a', value: 1 }]);
  await store.close();
  await t.throwsAsync(store.write([{ type: 'put', sublevel: store.tasks, key: 'b', value: 2 }]), { code: 'LEVEL_DATABASE_NOT_OPEN' });
  const again = await Store.open(dir);
  t.teardown(() => again.close());
  t.is(await again.tasks.get('a'), 1);
  t.is(await again.tasks.get('b'), undefined);
});

test("SPEC §14: the store keeps ~9 MB of writes in its write buffer (LevelDB's default of 4 MiB would have made a table file), and they are all there after a reopen", async (t) => {
  const dataDir = await tempDir(t);
  let store = await Store.open(dataDir);
  t.teardown(() => store.close());
  // ~9 MB in the buffer with LevelDB's per-entry overhead: above 4 MiB, under the 16 MiB of store/db.ts.
  const value = (i: number) => `${i}:${'x'.repeat(200)}:${randomBytes(150).toString('hex')}`;
  const entries = 16_384;
  for (let from = 0; from < entries; from += 512) {
    const ops = Array.from({ length: 512 }, (_, i) => ({
      type: 'put' as const,
      sublevel: store.payloads,
      key: seqKey(from + i),
      value: value(from + i),
    }));
    await store.write(ops);
  }
  const tables = () => readdirSync(Store.path(dataDir)).filter((f) => f.endsWith('.ldb'));
  t.deepEqual(tables(), [], 'no level-0 table yet: the writes are all in the write buffer and its log');
  await store.close();
  store = await Store.open(dataDir);
  t.is((await store.payloads.keys().all()).length, entries);
  t.regex((await store.payloads.get(seqKey(entries - 1))) as string, /^16383:x{200}:/);
});
