// bench/replay: replay and verify alone, several rounds on one journal, each figure next to a raw LevelDB
// read of the same journal in the same round (this VM's run-to-run spread is large; ratios hold better).
// `node --expose-gc dist/bench/replay.js [--events N] [--rounds R] [--dir DIR] [--impl PATH]...`
// A journal in DIR is reused when it has N events (the host writes it as bench/runtime's append does).
// Each --impl is a replay module (default: this build's) so two builds compare in one process.
import { mkdir } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Store } from '../store/db.js';
import { ActorHost } from '../src/runtime/host.js';

const BUCKET = { limit: 1000, windowMs: 60_000 };

interface Impl {
  name: string;
  replay(store: Store, filter: object, onStep: (s: unknown) => void): Promise<number>;
  verify(store: Store): Promise<{ events: number; checked: number; differences: unknown[] }>;
}

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : fallback;
}

async function build(dir: string, n: number): Promise<void> {
  if (existsSync(dir)) {
    const store = await Store.open(dir);
    const have = (await store.nextSeq()) - 1;
    await store.close();
    if (have === n) return;
    throw new Error(`${dir} holds ${have} events, not ${n}`);
  }
  await mkdir(dir, { recursive: true });
  const store = await Store.open(dir);
  const host = await ActorHost.start(store);
  let sent = 0;
  const lane = async () => {
    while (sent < n) {
      const i = sent++;
      await host.send(`b:${i % 10_000}`, 'bucket', BUCKET, { type: 'ADMIT' });
    }
  };
  await Promise.all(Array.from({ length: 8192 }, lane));
  await host.close();
  await store.close();
}

async function timed(fn: () => Promise<number>): Promise<{ n: number; wall: number; cpu: number }> {
  (globalThis as { gc?: () => void }).gc?.();
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const n = await fn();
  const wall = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return { n, wall, cpu: (c.user + c.system) / 1000 };
}

const rate = (n: number, ms: number) => Math.round((n / ms) * 1000);
// Printed at the start, with each round and at the end: a round run while the machine was busy shows.
const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');

async function main(): Promise<void> {
  const n = Number(arg('events', '200000'));
  const rounds = Number(arg('rounds', '5'));
  const dir = resolve(arg('dir', `/tmp/anet-bench-replay-${n}`));
  const implPaths = process.argv.flatMap((a, i) => (a === '--impl' ? [process.argv[i + 1]!] : []));
  const impls: Impl[] = [];
  for (const p of implPaths.length ? implPaths : [new URL('../src/runtime/replay.js', import.meta.url).pathname]) {
    impls.push({ name: p, ...((await import(pathToFileURL(resolve(p)).href)) as Omit<Impl, 'name'>) });
  }
  await build(dir, n);
  const store = await Store.open(dir);
  const only = process.argv.includes('--verify-only')
    ? ['verify']
    : process.argv.includes('--replay-only')
      ? ['replay']
      : ['replay', 'verify'];
  console.log(`${rounds} rounds of ${n} events; load average at start: ${load()}`);
  const sums = new Map<string, number[]>();
  const note = (k: string, v: number) => sums.set(k, [...(sums.get(k) ?? []), v]);
  for (let r = 0; r < rounds; r++) {
    const raw = await timed(async () => {
      let count = 0;
      const values = store.journal.values();
      for (let page = await values.nextv(4096); page.length > 0; page = await values.nextv(4096)) count += page.length;
      await values.close();
      return count;
    });
    const cells = [`raw read ${rate(raw.n, raw.wall)}/s (cpu ${rate(raw.n, raw.cpu)}/s)`];
    for (const [i, impl] of impls.entries()) {
      for (const what of only) {
        const m = await timed(async () => (what === 'replay' ? impl.replay(store, {}, () => {}) : (await impl.verify(store)).events));
        const ratio = rate(m.n, m.wall) / rate(raw.n, raw.wall);
        note(`${i} ${what}`, ratio);
        note(`${i} ${what} wall`, rate(m.n, m.wall));
        note(`${i} ${what} cpu`, rate(m.n, m.cpu));
        cells.push(`[${i}] ${what} ${rate(m.n, m.wall)}/s ${ratio.toFixed(2)}x (cpu ${rate(m.n, m.cpu)}/s)`);
      }
    }
    console.log(`round ${r + 1} [load ${load()}]: ${cells.join('  ')}`);
  }
  console.log(`load average at end: ${load()}`);
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
  for (const [i, impl] of impls.entries()) {
    for (const what of only) {
      console.log(
        `[${i}] ${impl.name} ${what}: median ${median(sums.get(`${i} ${what} wall`)!)}/s wall, ` +
          `${median(sums.get(`${i} ${what} cpu`)!)}/s cpu, ${median(sums.get(`${i} ${what}`)!).toFixed(2)}x of raw read`,
      );
    }
  }
  await store.close();
}

await main();
