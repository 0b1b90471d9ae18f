// bench/hub, directory search: agents written straight through the storage interface (registering 100k
// over HTTP would take the bench's whole budget), then GET /agents?q= over HTTP against the hub in its own
// process — a rare word, a common word, two words, a prefix — alternated with plain POSTs to the baseline
// server. Cards are generated from a seeded random source: the first 10k agents of the 100k run are the
// 10k run's agents, so one fill grows from the small size to the large one.
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { startHub } from '../../src/hub/server.js';
import { encodeKel } from '../../src/identity/kel.js';
import type { AgentRecord } from '../../src/hub/storage/types.js';
import { type Child, childHub, http, keepAlive, memoryIdentity, ms, pct, pool, row } from './common.js';

/** A small seeded generator (mulberry32): the same agent i on every run and size. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Words agents use: a few hundred of a real service vocabulary first (the frequent ones), then a long
// tail of made-up words, drawn with Zipf's law (the r-th word about 1/r as often as the first).
const REAL = `agent service text image audio video document data file model task result answer question summary
report language english french german spanish chinese japanese code python javascript review test search index
query database table chart graph analysis forecast price market stock news article blog email letter contract
legal medical health finance invoice receipt payment account customer support ticket schedule calendar meeting
note transcript speech voice music song lyric poem story book chapter translation grammar spelling style tone
formal casual short long fast accurate cheap secure private public open source cloud local server network web
page site link crawl scrape extract parse convert format json csv xml pdf html markdown table spreadsheet slide
presentation design logo icon photo picture drawing sketch render 3d map route travel hotel flight weather
climate energy solar battery car robot sensor device phone mobile app game player score team sport football
tennis chess math equation proof theorem physics chemistry biology gene protein cell research paper citation
reference library archive history museum art painting artist recipe food cooking kitchen restaurant menu wine
shop order delivery shipping package warehouse inventory supplier factory quality inspection safety compliance
audit risk fraud detection anomaly alert monitor log metric dashboard backup restore migrate deploy build release
version bug issue fix patch security vulnerability scan password identity login user profile privacy consent`
  .split(/\s+/)
  .filter(Boolean);
const SYLLABLES = 'ka lo mi ne ru ta vo xe bi da fu ge ho ji ku la ma no pa qui re si tu va we ya zo bran cor del fin gol har'.split(' ');

function vocabulary(): string[] {
  const rnd = random(42);
  const words = new Set(REAL);
  while (words.size < 6000) {
    const n = 2 + Math.floor(rnd() * 3);
    let w = '';
    for (let i = 0; i < n; i++) w += SYLLABLES[Math.floor(rnd() * SYLLABLES.length)];
    words.add(w);
  }
  return [...words];
}

const VOCAB = vocabulary();
/** Cumulative Zipf weights over VOCAB. */
const CUMULATIVE = (() => {
  const out: number[] = [];
  let sum = 0;
  for (let r = 1; r <= VOCAB.length; r++) {
    sum += 1 / r;
    out.push(sum);
  }
  return out.map((x) => x / sum);
})();

function word(rnd: () => number): string {
  const x = rnd();
  let lo = 0;
  let hi = CUMULATIVE.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (CUMULATIVE[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return VOCAB[lo]!;
}

const words = (rnd: () => number, min: number, max: number) =>
  Array.from({ length: min + Math.floor(rnd() * (max - min + 1)) }, () => word(rnd));

const TAGS = ['text', 'nlp', 'vision', 'audio', 'finance', 'legal', 'code', 'data', 'search', 'health', 'travel', 'media'];
const one = <T>(rnd: () => number, xs: readonly T[]) => xs[Math.floor(rnd() * xs.length)]!;

/** What agent `i` says about itself: 1 in 2000 is a translator by name, 1 in 8 mentions `translate`. */
function card(i: number, aid: string): { name: string; card: string; words: Set<string> } {
  const rnd = random(i + 1);
  const translator = i % 2000 === 7;
  const name = translator ? `${word(rnd)}-translator` : `${word(rnd)}-${word(rnd)}-${i}`;
  const description = words(rnd, 20, 60);
  if (rnd() < 0.125) description.splice(Math.floor(rnd() * description.length), 0, 'translate');
  const skills = Array.from({ length: 1 + Math.floor(rnd() * 4) }, (_, k) => {
    const verb = translator && k === 0 ? 'translate' : word(rnd);
    return {
      id: `${one(rnd, TAGS)}.${verb}`,
      name: `${verb} ${word(rnd)}`,
      description: words(rnd, 8, 25).join(' '),
      tags: Array.from({ length: 1 + Math.floor(rnd() * 3) }, () => one(rnd, TAGS)),
    };
  });
  const body = {
    name,
    description: description.join(' '),
    supportedInterfaces: [{ url: `anet://${aid}`, protocolBinding: 'ANET', protocolVersion: '1', tenant: '' }],
    version: '1.0.0',
    capabilities: { streaming: false, pushNotifications: false, extendedAgentCard: true, extensions: [] },
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills,
  };
  const all = new Set([...description, ...skills.flatMap((s) => [...s.name.split(' '), ...s.description.split(' ')])]);
  return { name, card: JSON.stringify(body), words: all };
}

/** A well-formed AID for agent i (the search never checks it against the KEL). */
const aidOf = (i: number) => `E${createHash('sha256').update(`bench-agent-${i}`).digest('base64url').slice(0, 43)}`;

/** How many agents use each word (over the agents written so far), to pick rare and common query words. */
type Counts = Map<string, number>;

async function fill(put: (rec: AgentRecord) => Promise<void>, from: number, to: number, kel: Uint8Array, counts: Counts): Promise<number> {
  const t0 = performance.now();
  await pool(to - from, 8, async (k) => {
    const i = from + k;
    const aid = aidOf(i);
    const c = card(i, aid);
    for (const w of c.words) counts.set(w, (counts.get(w) ?? 0) + 1);
    await put({
      aid,
      name: c.name,
      kel,
      card: c.card,
      seq: '1',
      digest: createHash('sha256').update(c.card).digest('hex'),
      updatedAt: Date.now(),
    });
  });
  return (to - from) / ((performance.now() - t0) / 1000);
}

/** The query mix: a rare word, the common `translate`, two words, a prefix (rotating among a few of each). */
function queries(counts: Counts, agents: number): { kind: string; q: string[] }[] {
  const byCount = [...counts.entries()].filter(([w]) => w !== 'translate' && w.length >= 5).sort((a, b) => a[1] - b[1]);
  const near = (share: number, n: number) => {
    const target = share * agents;
    return [...byCount]
      .sort((a, b) => Math.abs(a[1] - target) - Math.abs(b[1] - target))
      .slice(0, n)
      .map(([w]) => w);
  };
  const rare = near(0.001, 10);
  const common = near(0.15, 5);
  return [
    { kind: 'rare word', q: rare },
    { kind: 'common word', q: ['translate'] },
    { kind: 'two words', q: common.map((w) => `translate ${w}`) },
    { kind: 'prefix', q: ['transl', ...common.map((w) => w.slice(0, 4))] },
  ];
}

export interface SearchFigures {
  backend: string;
  agents: number;
  all: number[];
  base: number[];
  kinds: { kind: string; latencies: number[]; matches: string }[];
  fillPerSec: number;
  startMs: number;
  readyMs: number;
  rss: number;
  heap: number;
  firstForTranslate: string;
}

/** Searches alternated with baseline POSTs: `n` of each. */
async function measure(hub: Child, plain: Child, counts: Counts, agents: number, n: number) {
  const agent = keepAlive(4);
  const mix = queries(counts, agents);
  const body = Buffer.alloc(600, 1);
  const kinds = mix.map((m) => ({ kind: m.kind, latencies: [] as number[], matches: '' }));
  const all: number[] = [];
  const base: number[] = [];
  let first = '';
  const search = async (q: string) => {
    const r = await http(agent, hub.url, 'GET', `/agents?q=${encodeURIComponent(q)}&limit=20`);
    if (r.status !== 200) throw new Error(`search ${q}: ${r.status} ${r.body.toString('utf8').slice(0, 200)}`);
    return JSON.parse(r.body.toString('utf8')) as { agents: { name: string }[] };
  };
  for (let i = 0; i < 20; i++) {
    await search(mix[i % mix.length]!.q[0]!); // warm-up
    await http(agent, plain.url, 'POST', '/', body);
  }
  first = (await search('translate')).agents[0]?.name ?? '(none)';
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await http(agent, plain.url, 'POST', '/', body);
    base.push(performance.now() - t0);
    const m = mix[i % mix.length]!;
    const k = kinds[i % mix.length]!;
    const q = m.q[Math.floor(i / mix.length) % m.q.length]!;
    const t1 = performance.now();
    await search(q);
    const took = performance.now() - t1;
    all.push(took);
    k.latencies.push(took);
  }
  for (const [j, m] of mix.entries()) {
    const n = counts.get(m.q[0]!);
    const used = n === undefined ? '' : ` (in ${n} agents)`;
    kinds[j]!.matches = `${m.q.length > 1 ? `${m.q.length} queries, e.g. ` : ''}"${m.q[0]}"${used}`;
  }
  agent.destroy();
  return { all, base, kinds, first };
}

/**
 * Fills a hub's storage to each size and searches it (LevelDB: `db` undefined). `plain` is the baseline
 * server. Returns one figure set per size.
 */
export async function benchSearch(root: string, plain: Child, sizes: number[], n: number, db?: string): Promise<SearchFigures[]> {
  const backend = db ? 'PostgreSQL' : 'LevelDB';
  const dataDir = join(root, db ? 'search-pg' : 'search-level');
  const kel = encodeKel(memoryIdentity().kel.events);
  const counts: Counts = new Map();
  const out: SearchFigures[] = [];
  let have = 0;
  for (const size of sizes) {
    // Written in the bench's process, through the storage interface, then searched in the hub's own.
    const writer = await startHub({ dataDir, port: 0, ...(db ? { db } : {}) });
    const fillPerSec = await fill((rec) => writer.storage.agents.put(rec), have, size, kel, counts);
    have = size;
    await writer.close();
    const t0 = performance.now();
    const hub = await childHub({ dataDir, ...(db ? { db } : {}) });
    const readyMs = performance.now() - t0;
    const mem = await hub.mem();
    try {
      const m = await measure(hub, plain, counts, size, n);
      out.push({
        backend,
        agents: size,
        ...m,
        firstForTranslate: m.first,
        fillPerSec,
        startMs: hub.ready.startMs as number,
        readyMs,
        rss: mem.rss,
        heap: mem.heapUsed,
      });
    } finally {
      await hub.stop();
    }
  }
  return out;
}

export function printSearch(f: SearchFigures, ok: { p50: number; p99: number }): boolean {
  const p50 = pct(f.all, 50);
  const p99 = pct(f.all, 99);
  const b50 = pct(f.base, 50);
  const b99 = pct(f.base, 99);
  const label = `search, ${f.backend}, ${f.agents.toLocaleString('en')} agents`;
  const pass = p50 <= ok.p50 && p99 <= ok.p99;
  row(`  baseline POST (alternated with it)`, `p50 ${ms(b50)}  p99 ${ms(b99)}`, '1.00x');
  row(
    label,
    `p50 ${ms(p50)}  p99 ${ms(p99)}`,
    `${(p50 / b50).toFixed(1)}x / ${(p99 / b99).toFixed(1)}x`,
    `p50<=${ok.p50} p99<=${ok.p99} ms`,
    pass,
  );
  for (const k of f.kinds)
    row(
      `    ${k.kind}: ${k.matches}`.slice(0, 86),
      `p50 ${ms(pct(k.latencies, 50))}  p99 ${ms(pct(k.latencies, 99))}`,
      `${(pct(k.latencies, 50) / b50).toFixed(1)}x p50`,
    );
  console.log(
    `    (${f.all.length} searches; written at ${f.fillPerSec.toFixed(0)} agents/s through storage.agents.put; first for "translate": ${f.firstForTranslate}; hub start ${f.startMs.toFixed(0)} ms in startHub, ${f.readyMs.toFixed(0)} ms to ready from fork; hub RSS ${(f.rss / 2 ** 20).toFixed(0)} MiB, heap ${(f.heap / 2 ** 20).toFixed(0)} MiB)`,
  );
  return pass;
}
