// SPEC §9.3, PROTOCOL §6.4, §6.9: a call's request waits in the caller's outbox until the provider answers
// (to be sent again, across restarts), but its files' keys wait beside the store (outbox-keys/<task>,
// 0600) and are unlinked once the request is let go: LevelDB would keep them in its log and tables. A real
// store in a temporary directory; the resends' timers and the relay are recorded (the flows through a real
// relay are test/hostile/lost-tasks and test/hostile/files-review).
import test from 'ava';
import { existsSync } from 'node:fs';
import { readdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Store } from '../../store/db.js';
import { Resends, type Outbox } from '../../src/node/caller/resend.js';
import { newRecord } from '../../src/node/caller/records.js';
import type { CborValue } from '../../src/identity/cbor.js';
import { tempDir } from '../helpers/tmp.js';
import { until } from '../helpers/wait.js';

const KEY = new Uint8Array(32).fill(7);
const request = { capability: 'file.sum', args: '{}', files: [{ name: 'a.png', cid: 'bafkreiaaaa', size: 10, key: KEY, chunk: 1024 }] };

/** Resends over `store`, with timers the test fires and a relay that records each body sent. */
function resendsOn(store: Store) {
  const timers: (() => void)[] = [];
  const sent: Map<string, CborValue>[] = [];
  const resends = new Resends(
    {
      store,
      now: () => 1_000,
      messenger: async () => ({ send: async (_to: string, _type: string, body: Map<string, CborValue>) => void sent.push(body) }) as never,
      clock: {
        at: (_at: number, fn: () => void) => {
          timers.push(fn);
          return { cancel: () => {} };
        },
      },
    },
    {
      turn: (_task, fn) => fn(),
      record: async (task) => newRecord(task, 'bafyprovider', 'file.sum', 1_000),
      giveUp: async () => {},
    },
  );
  return { resends, timers, sent };
}

const keysDir = (store: Store) => join(store.dataDir, 'outbox-keys');

test("SPEC §9.3: the outbox keeps the request without its files' keys; they wait in outbox-keys/<task>, 0600, and a resend after a restart carries them again", async (t) => {
  const dir = await tempDir(t);
  const store = await Store.open(dir);
  const first = resendsOn(store);
  await store.write([await first.resends.keep('a1b2', { to: 'bafyprovider', request })]);
  const kept = (await store.payloads.get('outbox/a1b2')) as Outbox;
  t.is((kept.request!.files![0] as { key: Uint8Array }).key.length, 0, 'no key in the store');
  t.is((await stat(join(keysDir(store), 'a1b2'))).mode & 0o777, 0o600);
  first.resends.close();
  // A restart: the schedule is rebuilt from the outbox, and the due resend goes with the key put back.
  const again = resendsOn(store);
  t.is(await again.resends.resume(), 1);
  again.timers[0]!();
  await until(() => again.sent.length > 0, 'the resend', 10);
  const files = again.sent[0]!.get('files') as Map<string, CborValue>[];
  t.deepEqual(new Uint8Array(files[0]!.get('key') as Uint8Array), KEY);
  again.resends.close();
  await store.close();
});

test('SPEC §9.3: once the provider has answered (or the task ended) and that write landed, the keys file is gone', async (t) => {
  const store = await Store.open(await tempDir(t));
  const { resends } = resendsOn(store);
  for (const task of ['c0ffee01', 'c0ffee02']) await store.write([await resends.keep(task, { to: 'bafyprovider', request })]);
  resends.sent('c0ffee01', 'bafyprovider', 1_000);
  resends.sent('c0ffee02', 'bafyprovider', 1_000);
  await store.write(resends.heard('c0ffee01'));
  await store.write(resends.stop('c0ffee02'));
  t.true(existsSync(join(keysDir(store), 'c0ffee01')), 'kept until its own write has landed and it is told');
  await resends.dropLetGo('c0ffee01');
  await resends.dropLetGo('c0ffee02');
  t.deepEqual(await readdir(keysDir(store)), []);
  resends.close();
  await store.close();
});

test('SPEC §9.3: at start, keys left without their outbox entry (a crash between the two writes) are deleted', async (t) => {
  const store = await Store.open(await tempDir(t));
  const { resends } = resendsOn(store);
  await store.write([await resends.keep('beef0001', { to: 'bafyprovider', request })]);
  await writeFile(join(keysDir(store), 'dead0001'), '{}', { mode: 0o600 });
  t.is(await resends.resume(), 1);
  t.deepEqual(await readdir(keysDir(store)), ['beef0001']);
  resends.close();
  await store.close();
});
