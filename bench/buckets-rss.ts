// bench/buckets-rss: run by bench/runtime in a process of its own, so the figure is the memory of a node
// holding that many callers' buckets (most passivated to LevelDB), not what earlier phases left behind.
// Prints {before, after, live} as JSON: RSS before and after, and the actors still in memory.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Store } from '../store/db.js';
import { ActorHost } from '../src/runtime/host.js';

const gc = () => (globalThis as { gc?: () => void }).gc?.();

async function bucketsRss(count: number): Promise<{ before: number; after: number; live: number }> {
  const dir = await mkdtemp(join(tmpdir(), 'anet-bench-'));
  try {
    const store = await Store.open(dir);
    const host = await ActorHost.start(store, { maxLive: 10_000 });
    gc();
    const before = process.memoryUsage().rss;
    for (let i = 0; i < count; i += 5000) {
      await Promise.all(
        Array.from({ length: Math.min(5000, count - i) }, (_, j) =>
          host.send(`caller:${i + j}`, 'bucket', { limit: 60, windowMs: 60_000 }, { type: 'ADMIT' }),
        ),
      );
    }
    await host.idle();
    gc();
    const after = process.memoryUsage().rss;
    const live = host.liveCount();
    await host.close();
    await store.close();
    return { before, after, live };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

console.log(JSON.stringify(await bucketsRss(Number(process.argv[2] ?? 100_000))));
