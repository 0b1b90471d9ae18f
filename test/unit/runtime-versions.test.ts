// SPEC §14 (the journal is the truth; replay recomputes what its commands led to): every journal entry
// and snapshot carries the version of its kind's transitions (src/runtime/versions.ts); those written
// before versions read as version 1; an entry or snapshot of a version this build does not have is
// never recomputed: start-up, replay and verify refuse with one line naming it and what to do.
import test from 'ava';
import { cp } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Store, type JournalEntry, type SnapshotRecord } from '../../store/db.js';
import { ActorHost } from '../../src/runtime/host.js';
import { ManualClock } from '../../src/runtime/clock.js';
import { KINDS, type ActorKind } from '../../src/runtime/kinds.js';
import { verify } from '../../src/runtime/replay.js';
import { UnknownVersionError } from '../../src/runtime/versions.js';
import { tempDir } from '../helpers/tmp.js';
import { runCli } from '../helpers/cli.js';

const T0 = Date.UTC(2026, 11, 1);
const INPUT = { limit: 3, windowMs: 60_000 };
/** A build whose bucket transitions are version 2 (as a later anet's would be). */
const NEWER: Record<string, ActorKind> = { ...KINDS, bucket: { ...KINDS.bucket!, version: 2 } };

/** Writes a few bucket and in-flight events with `kinds`; `crash` leaves them past the checkpoint. */
async function write(dir: string, kinds: Record<string, ActorKind>, crash: boolean): Promise<void> {
  const store = await Store.open(dir);
  const host = await ActorHost.start(store, { clock: new ManualClock(T0), kinds });
  for (let i = 0; i < 3; i++) await host.send('b:1', 'bucket', INPUT, { type: 'ADMIT' });
  await host.send('f:1', 'inflight', { max: 2 }, { type: 'START', id: 'c1' });
  if (crash) await host.idle();
  else await host.close();
  await store.close();
}

test('SPEC §14: journal entries and snapshots carry the version of their kind', async (t) => {
  const dir = await tempDir(t);
  await write(dir, KINDS, false);
  const store = await Store.open(dir);
  t.teardown(() => store.close());
  const entries = (await store.journal.values().all()) as JournalEntry[];
  t.deepEqual(
    entries.map((e) => [e.kind, e.version]),
    [
      ['bucket', 1],
      ['bucket', 1],
      ['bucket', 1],
      ['inflight', 1],
    ],
  );
  const snapshots = (await store.snapshots.values().all()) as SnapshotRecord[];
  t.deepEqual(snapshots.map((s) => [s.kind, s.version]).sort(), [
    ['bucket', 1],
    ['inflight', 1],
  ]);
});

test('SPEC §14: entries and snapshots written before versions (test/fixtures/journal-v1) read as version 1 and verify', async (t) => {
  const dir = await tempDir(t);
  await cp(fileURLToPath(new URL('../fixtures/journal-v1/store', import.meta.url)), join(dir, 'store'), { recursive: true });
  const store = await Store.open(dir);
  t.teardown(() => store.close());
  const entries = (await store.journal.values().all()) as JournalEntry[];
  t.true(entries.length > 0 && entries.every((e) => e.version === undefined), 'the fixture predates versions');
  t.like(await verify(store), { differences: [], damage: null });
});

test('SPEC §14: start-up refuses, in one line, to recompute entries past the checkpoint of a version it does not have', async (t) => {
  const dir = await tempDir(t);
  await write(dir, NEWER, true);
  const store = await Store.open(dir);
  t.teardown(() => store.close());
  const err = await t.throwsAsync(ActorHost.start(store, { clock: new ManualClock(T0) }), { instanceOf: UnknownVersionError });
  t.is(
    err!.message,
    `journal entry #1 (actor b:1) is version 2 of actor kind "bucket", and this anet has version 1 of it only: it was not recomputed; ` +
      `run the anet version that wrote ${dir} (a newer one, or the one before this kind changed)`,
  );
  t.false(err!.message.includes('\n'));
  // And the other way: a build whose version is newer than the entries'.
  await t.throwsAsync(
    ActorHost.start(store, { clock: new ManualClock(T0), kinds: { ...NEWER, bucket: { ...KINDS.bucket!, version: 3 } } }),
    { instanceOf: UnknownVersionError, message: /version 2 of actor kind "bucket", and this anet has version 3 of it only/ },
  );
});

test('SPEC §14: a snapshot of a version this build does not have is refused when its actor is loaded; other actors go on', async (t) => {
  const dir = await tempDir(t);
  await write(dir, NEWER, false);
  const store = await Store.open(dir);
  const host = await ActorHost.start(store, { clock: new ManualClock(T0) });
  t.teardown(async () => {
    await host.close();
    await store.close();
  });
  await t.throwsAsync(host.send('b:1', 'bucket', INPUT, { type: 'ADMIT' }), {
    instanceOf: UnknownVersionError,
    message: /^the snapshot of actor b:1 \(as of #3\) is version 2 of actor kind "bucket"/,
  });
  await t.throwsAsync(host.state('b:1'), { instanceOf: UnknownVersionError });
  t.is((await host.send('f:1', 'inflight', { max: 2 }, { type: 'START', id: 'c2' })).value, 'full');
});

test('SPEC §14: anet replay and replay --verify refuse entries of a version this build does not have, in one line, exit 1', async (t) => {
  const dir = await tempDir(t);
  await write(dir, NEWER, false);
  const line = `anet: journal entry #1 (actor b:1) is version 2 of actor kind "bucket", and this anet has version 1 of it only: it was not recomputed; run the anet version that wrote ${dir} (a newer one, or the one before this kind changed)`;
  for (const args of [['replay'], ['replay', '--verify'], ['replay', '--actor', 'b:1', '--json']]) {
    const r = await runCli([...args, '--data', dir]);
    t.is(r.code, 1, args.join(' '));
    t.is(r.stderr, line, args.join(' '));
    t.is(r.stdout, '', `${args.join(' ')}: nothing recomputed is printed`);
  }
  // Entries of kinds this build has are replayed as before.
  const other = await runCli(['replay', '--actor', 'f:1', '--data', dir]);
  t.is(other.code, 0, other.stderr);
  t.regex(other.stdout, /^#4 .* f:1 START: idle -> busy$/);
});

test('SPEC §14: an entry of a kind this build does not know at all is refused the same way', async (t) => {
  const dir = await tempDir(t);
  const later: Record<string, ActorKind> = { ...KINDS, 'bucket-v9': { ...KINDS.bucket!, version: 1 } };
  const store = await Store.open(dir);
  const host = await ActorHost.start(store, { clock: new ManualClock(T0), kinds: later });
  await host.send('n:1', 'bucket-v9', INPUT, { type: 'ADMIT' });
  await host.idle();
  await store.close();
  const again = await Store.open(dir);
  t.teardown(() => again.close());
  await t.throwsAsync(ActorHost.start(again, { clock: new ManualClock(T0) }), {
    instanceOf: UnknownVersionError,
    message:
      /^journal entry #1 \(actor n:1\) is version 1 of actor kind "bucket-v9", which this anet does not know: it was not recomputed; run the anet version that wrote /,
  });
});
