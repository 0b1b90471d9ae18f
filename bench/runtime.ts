// bench/runtime: journal append, replay, memory with 100 000 passivated buckets, restore of 1 000 000
// events. Every figure is printed with its ratio to a raw LevelDB baseline measured in this same run.
// Targets (issue "Event-sourced runtime"): ≥ 50k events/s append, ≥ 200k events/s replay,
// ≤ 300 MB RSS at 100k buckets, ≤ 5 s restore.
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Store, seqKey } from '../store/db.js';
import { ActorHost } from '../src/runtime/host.js';
import { replay, verify } from '../src/runtime/replay.js';

// Per-caller buckets as configured in practice (SPEC §2.1 allows any limit; 1000/min is generous).
const BUCKET = { limit: 1000, windowMs: 60_000 };
const mb = (bytes: number) => (bytes / 1048576).toFixed(0);
const rate = (n: number, ms: number) => Math.round((n / ms) * 1000);

async function withDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'anet-bench-'));
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Baseline: the raw LevelDB batch put of journal-shaped entries, 4096 per batch. */
async function rawBatchPut(n: number): Promise<number> {
  return withDir(async (dir) => {
    const store = await Store.open(dir);
    const t0 = performance.now();
    for (let i = 0; i < n; i += 4096) {
      const ops = [];
      for (let j = i; j < Math.min(n, i + 4096); j++) {
        const entry = { seq: j + 1, actor: `b:${j % 1000}`, kind: 'bucket', event: { type: 'ADMIT', at: 1_700_000_000_000 + j } };
        ops.push({ type: 'put' as const, sublevel: store.journal, key: seqKey(j + 1), value: entry });
      }
      await store.db.batch(ops as never);
    }
    const ms = performance.now() - t0;
    await store.close();
    return rate(n, ms);
  });
}

/** Sends n events over `actors` buckets with up to `window` in flight. */
async function pump(host: ActorHost, n: number, actors: number, window = 8192, offset = 0): Promise<void> {
  let sent = 0;
  const lane = async () => {
    while (sent < n) {
      const i = sent++;
      await host.send(`b:${(i + offset) % actors}`, 'bucket', BUCKET, { type: 'ADMIT' });
    }
  };
  await Promise.all(Array.from({ length: window }, lane));
}

async function append(n: number, dir: string, sync = false): Promise<number> {
  const store = await Store.open(dir);
  const host = await ActorHost.start(store, { sync });
  const t0 = performance.now();
  await pump(host, n, 10_000);
  const ms = performance.now() - t0;
  await host.close();
  await store.close();
  return rate(n, ms);
}

/** Raw read of the journal (values decoded by the codec); `batchBytes` is classic-level's highWaterMarkBytes. */
async function rawRead(dir: string, batchBytes?: number): Promise<number> {
  const store = await Store.open(dir);
  const t0 = performance.now();
  let n = 0;
  const values = store.journal.values(batchBytes ? ({ highWaterMarkBytes: batchBytes } as object) : {});
  for (let page = await values.nextv(4096); page.length > 0; page = await values.nextv(4096)) n += page.length;
  await values.close();
  const ms = performance.now() - t0;
  await store.close();
  return rate(n, ms);
}

async function replayRate(dir: string): Promise<number> {
  const store = await Store.open(dir);
  const t0 = performance.now();
  const n = await replay(store, {}, () => {});
  const ms = performance.now() - t0;
  await store.close();
  return rate(n, ms);
}

/** `anet replay --verify`: rebuild and compare every snapshot (fails the bench if one differs). */
async function verifyRate(dir: string): Promise<{ rate: number; ok: boolean }> {
  const store = await Store.open(dir);
  const t0 = performance.now();
  const r = await verify(store);
  const ms = performance.now() - t0;
  await store.close();
  return { rate: rate(r.events, ms), ok: r.differences.length === 0 && r.checked === r.snapshots };
}

const REPLAY_ROUNDS = 5;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');

/** One figure timed after a full GC, so what the phase before left to collect is not charged to it. */
function fresh<T>(fn: () => Promise<T>): Promise<T> {
  (globalThis as { gc?: () => void }).gc?.();
  return fn();
}

/**
 * Replay and verify, each round beside its baseline (raw reads of the same journal), REPLAY_ROUNDS rounds:
 * the median of each figure and of each round's ratio (on a shared, loaded 2-core machine one round alone
 * says little). Verify passes only if no round found a difference.
 */
async function replayRounds(dir: string) {
  console.log(`replay: ${REPLAY_ROUNDS} rounds of raw read, raw read in 1 MiB batches, replay, --verify; load average at start: ${load()}`);
  const rounds: { read: number; big: number; replay: number; verify: number; ok: boolean }[] = [];
  for (let i = 0; i < REPLAY_ROUNDS; i++) {
    const read = await fresh(() => rawRead(dir));
    // Replay asks for 1 MiB batches (classic-level's default stops each nextv at 16 KiB, ~250 entries).
    const big = await fresh(() => rawRead(dir, 1 << 20));
    const replay = await fresh(() => replayRate(dir));
    const v = await fresh(() => verifyRate(dir));
    rounds.push({ read, big, replay, verify: v.rate, ok: v.ok });
    console.log(
      `  round ${i + 1} [load ${load()}]: raw read ${read}/s, 1 MiB batches ${big}/s, replay ${replay}/s (${(replay / read).toFixed(2)}x), verify ${v.rate}/s`,
    );
  }
  console.log(`replay: load average at end: ${load()}; medians:`);
  const med = (f: (r: (typeof rounds)[number]) => number) => median(rounds.map(f));
  return {
    readRate: med((r) => r.read),
    bigRead: med((r) => r.big),
    replayed: med((r) => r.replay),
    verified: { rate: med((r) => r.verify), ok: rounds.every((r) => r.ok) },
    bigRatio: med((r) => r.big / r.read),
    replayRatio: med((r) => r.replay / r.read),
    verifyRatio: med((r) => r.verify / r.read),
  };
}

/**
 * RSS with `count` buckets, measured in a fresh process (bench/buckets-rss.ts): what a node holding that
 * many callers' buckets uses, not what this process kept from the phases before.
 */
function bucketsRss(count: number): Promise<{ before: number; after: number; live: number }> {
  const script = fileURLToPath(new URL('./buckets-rss.js', import.meta.url));
  const child = spawnSync(process.execPath, ['--expose-gc', script, String(count)], { encoding: 'utf8' });
  if (child.status !== 0) throw new Error(`bench/buckets-rss failed: ${child.stderr}`);
  return Promise.resolve(JSON.parse(child.stdout));
}

async function restore(n: number): Promise<{ writeRate: number; startMs: number; firstMs: number }> {
  return withDir(async (dir) => {
    let store = await Store.open(dir);
    let host = await ActorHost.start(store);
    const t0 = performance.now();
    await pump(host, n, 10_000);
    const writeRate = rate(n, performance.now() - t0);
    // No close(): restore after a crash must not depend on a final snapshot flush.
    await host.idle();
    await store.close();
    const t1 = performance.now();
    store = await Store.open(dir);
    host = await ActorHost.start(store);
    const startMs = performance.now() - t1;
    await host.send('b:1', 'bucket', BUCKET, { type: 'ADMIT' });
    const firstMs = performance.now() - t1;
    await host.close();
    await store.close();
    return { writeRate, startMs, firstMs };
  });
}

export async function benchRuntime(opts: { events: number; buckets: number; restoreEvents: number }): Promise<boolean> {
  const line = (label: string, value: string, ratio: string, target: string, ok: boolean) =>
    console.log(`${label.padEnd(34)} ${value.padStart(14)}  ${ratio.padEnd(26)} ${target.padEnd(16)} ${ok ? 'ok' : 'MISSED'}`);
  console.log(
    `bench/runtime (node ${process.version}, ${opts.events} events, ${opts.buckets} buckets, ${opts.restoreEvents} restore events)`,
  );
  const baseline = await rawBatchPut(opts.events);
  let results: boolean[] = [];
  await withDir(async (dir) => {
    const appendRate = await append(opts.events, dir);
    line('baseline: raw LevelDB batch put', `${baseline}/s`, '1.00x', '', true);
    line(
      'journal append (host, batched)',
      `${appendRate}/s`,
      `${(appendRate / baseline).toFixed(2)}x of raw put`,
      '>= 50000/s',
      appendRate >= 50_000,
    );
    const synced = await withDir((d) => append(opts.events, d, true));
    line('  with fsync per batch (the daemon)', `${synced}/s`, `${(synced / baseline).toFixed(2)}x of raw put`, '', true);
    const r = await replayRounds(dir);
    const { readRate, bigRead, replayed, verified } = r;
    line('baseline: raw LevelDB read (nextv)', `${readRate}/s`, '1.00x', '', true);
    line('  in 1 MiB batches, as replay reads', `${bigRead}/s`, `${r.bigRatio.toFixed(2)}x of raw read`, '', true);
    line('replay (pure transitions)', `${replayed}/s`, `${r.replayRatio.toFixed(2)}x of raw read`, '>= 200000/s', replayed >= 200_000);
    line(
      '  --verify (every snapshot compared)',
      `${verified.rate}/s`,
      `${r.verifyRatio.toFixed(2)}x of raw read`,
      'no difference',
      verified.ok,
    );
    results = [appendRate >= 50_000, replayed >= 200_000, verified.ok];
  });
  const rss = await bucketsRss(opts.buckets);
  line(
    `RSS, ${opts.buckets} buckets (own process)`,
    `${mb(rss.after)} MB`,
    `+${mb(rss.after - rss.before)} MB, ${rss.live} live`,
    '<= 300 MB',
    rss.after <= 300 * 1048576,
  );
  const r = await restore(opts.restoreEvents);
  line(
    `restore after ${opts.restoreEvents} events`,
    `${r.startMs.toFixed(0)} ms`,
    `first event served ${r.firstMs.toFixed(0)} ms`,
    '<= 5000 ms',
    r.firstMs <= 5000,
  );
  line('  (writing them)', `${r.writeRate}/s`, `${(r.writeRate / baseline).toFixed(2)}x of raw put`, '', true);
  return [...results, rss.after <= 300 * 1048576, r.firstMs <= 5000].every(Boolean);
}
