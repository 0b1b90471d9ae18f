// SPEC §14: `anet replay` rebuilds states with pure transitions, `--verify` matches the snapshots and
// fails on a tampered journal; one process owns the store.
import test from 'ava';
import { Store, seqKey, type JournalEntry } from '../store/db.js';
import { ActorHost } from '../src/runtime/host.js';
import { ManualClock } from '../src/runtime/clock.js';
import { tempDir } from './helpers/tmp.js';
import { runBin, runCli } from './helpers/cli.js';

const T0 = Date.UTC(2026, 11, 1);

async function journalWithTraffic(dir: string): Promise<void> {
  const clock = new ManualClock(T0);
  const store = await Store.open(dir);
  const host = await ActorHost.start(store, { clock, checkpointEvery: 16 });
  for (let i = 0; i < 30; i++) {
    await host.send(`b:${i % 3}`, 'bucket', { limit: 4, windowMs: 10_000 }, { type: 'ADMIT' });
    await host.send('inflight:x', 'inflight', { max: 2 }, { type: i % 2 ? 'FINISH' : 'START', id: `c${i >> 1}` });
    await clock.advance(700, () => host.idle());
  }
  await host.close();
  await store.close();
}

test('SPEC §14: replay --verify rebuilds every snapshot exactly', async (t) => {
  const dir = await tempDir(t);
  await journalWithTraffic(dir);
  const r = await runCli(['replay', '--verify', '--data', dir]);
  t.is(r.code, 0, r.stdout);
  t.regex(r.stdout, /^ok: 4 of 4 snapshots rebuilt from \d+ events, 0 difference\(s\)$/);
});

test('SPEC §14: replay prints each transition, filtered by actor and seq range', async (t) => {
  const dir = await tempDir(t);
  await journalWithTraffic(dir);
  const all = await runCli(['replay', '--data', dir]);
  t.is(all.code, 0);
  const lines = all.stdout.split('\n');
  t.regex(lines[0]!, /^#1 2026-12-01T00:00:00.000Z b:0 ADMIT: open -> open$/);
  t.true(lines.some((l) => /b:\d ADMIT: open -> limited$/.test(l)));
  t.true(
    lines.some((l) => / b:\d TICK: limited -> open$/.test(l)),
    'deadline ticks are journaled transitions',
  );

  const one = await runCli(['replay', '--actor', 'inflight:x', '--from', '5', '--to', '20', '--json', '--data', dir]);
  const steps = one.stdout.split('\n').map((l) => JSON.parse(l));
  t.true(steps.length > 0);
  t.true(steps.every((s) => s.actor === 'inflight:x' && s.seq >= 5 && s.seq <= 20));
  t.true(steps.every((s) => ['idle', 'busy', 'full'].includes(s.to)));
  t.is((await runCli(['replay', '--from', 'x', '--data', dir])).code, 2);
});

test('SPEC §14: replay --verify fails on a tampered journal, naming the entry the hash chain no longer matches', async (t) => {
  const dir = await tempDir(t);
  await journalWithTraffic(dir);
  const store = await Store.open(dir);
  // Move one ADMIT of b:1 an hour later: the window it counted in no longer holds it.
  let target: JournalEntry | undefined;
  for await (const e of store.journal.values()) {
    const entry = e as JournalEntry;
    if (entry.actor === 'b:1' && entry.event.type === 'ADMIT' && entry.seq > 10) target = target ?? entry;
  }
  t.truthy(target);
  await store.journal.put(seqKey(target!.seq), { ...target!, event: { ...target!.event, type: 'TICK' } });
  await store.close();
  const r = await runCli(['replay', '--verify', '--data', dir]);
  t.is(r.code, 1);
  t.regex(
    r.stdout,
    new RegExp(
      `^damaged: the journal from #${target!.seq}: entry #${target!.seq} does not match its hash; restore ${dir} from a backup`,
      'm',
    ),
  );
  t.regex(r.stdout, /^differs: b:1 at #\d+: /m);
  t.regex(r.stdout, new RegExp(`FAILED: .* 1 difference\\(s\\); the journal is damaged from #${target!.seq}$`));
});

test('SPEC §14: a deleted journal entry is caught too', async (t) => {
  const dir = await tempDir(t);
  await journalWithTraffic(dir);
  const store = await Store.open(dir);
  let last: JournalEntry | undefined;
  for await (const e of store.journal.values({ reverse: true, limit: 1 })) last = e as JournalEntry;
  await store.journal.del(seqKey(last!.seq));
  await store.close();
  const r = await runBin(['replay', '--verify', '--data', dir]);
  t.is(r.code, 1);
  t.regex(r.stdout, new RegExp(`^damaged: the journal from #${last!.seq}: entry #${last!.seq} is missing`, 'm'));
  t.regex(r.stdout, /differs: .* at #\d+: /);
});

test('SPEC §14: a second process on the same data dir gets one clear line', async (t) => {
  const dir = await tempDir(t);
  await journalWithTraffic(dir);
  const store = await Store.open(dir);
  t.teardown(() => store.close());
  const r = await runBin(['replay', '--verify', '--data', dir]);
  t.is(r.code, 1);
  t.is(r.stderr.trim(), `anet: another anet is running with this data dir (${dir}); stop it first, or work on a copy of the directory`);
});

test('SPEC §14: replay on a node that never ran says so', async (t) => {
  const dir = await tempDir(t);
  const r = await runCli(['replay', '--data', dir]);
  t.is(r.code, 1);
  t.is(r.stderr, `anet: no journal in ${dir}: this node has not run yet`);
});
