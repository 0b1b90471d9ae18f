// SPEC §14 (the journal is the truth: `anet replay --verify` rebuilds every actor from it and finds the
// stored snapshots), §9.5 and §10 across an upgrade: the data dirs in test/fixtures/datadir-2026-12 were
// written by the anet of December 2026 (test/fixtures/make-datadir.ts: a provider, a caller and their
// hub through every actor kind that version wrote). Whatever changes later in the journal's format, the
// transitions or the store, these data dirs must still verify, replay to the same steps and start. Each
// test works on a copy in a temp dir: the committed fixture is never opened.
import test, { type ExecutionContext } from 'ava';
import { chmod, cp, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir } from './helpers/tmp.js';
import { runBin, runCli } from './helpers/cli.js';
import { OffsetClock } from './helpers/clock.js';
import { startHub } from '../src/hub/server.js';
import { startDaemon, type Daemon } from '../src/daemon/daemon.js';
import { startSampleService, echoHandler } from '../src/service/sample.js';

const FIXTURE = fileURLToPath(new URL('./fixtures/datadir-2026-12', import.meta.url));

/** A copy of one of the fixture's data dirs (`provider`, `caller`, `hub`) in a fresh temp dir. */
async function copyOf(t: ExecutionContext, name: string, root?: string): Promise<string> {
  const dir = join(root ?? (await tempDir(t)), name);
  await cp(join(FIXTURE, name), dir, { recursive: true });
  // A checkout does not keep file modes: the keys are the operator's 0600 files again.
  for (const key of ['keys/identity.cbor', 'keys/enc.cbor']) await chmod(join(dir, key), 0o600).catch(() => {});
  return dir;
}

interface Step {
  seq: number;
  actor: string;
  kind: string;
  event: { type: string; at: number };
  from: unknown;
  to: unknown;
}

/** Every step `anet replay --json` prints for a data dir (in-process: `--verify` runs the built CLI). */
async function steps(t: ExecutionContext, dir: string): Promise<Step[]> {
  const r = await runCli(['replay', '--json', '--data', dir]);
  t.is(r.code, 0, r.stderr);
  return r.stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Step);
}

/** How many events of each kind and type, as `kind TYPE`: count. */
function counts(all: Step[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of all) out[`${s.kind} ${s.event.type}`] = (out[`${s.kind} ${s.event.type}`] ?? 0) + 1;
  return out;
}

/** Each actor's state after its last step, grouped by kind and sorted: what replay rebuilt. */
function finalStates(all: Step[]): Record<string, unknown[]> {
  const last = new Map<string, Step>();
  for (const s of all) last.set(s.actor, s);
  const out: Record<string, unknown[]> = {};
  for (const s of last.values()) out[s.kind] = [...(out[s.kind] ?? []), s.to];
  for (const states of Object.values(out)) states.sort();
  return out;
}

/** The steps deadlines made (journaled TICKs): kind, from, to. */
const ticks = (all: Step[]) => all.filter((s) => s.event.type === 'TICK').map((s) => [s.kind, s.from, s.to]);

test("SPEC §14: the provider's data dir of 2026-12 verifies and replays to the same steps (bucket, inflight, call, reply-limiter)", async (t) => {
  const dir = await copyOf(t, 'provider');
  const verified = await runBin(['replay', '--verify', '--data', dir]);
  t.is(verified.code, 0, verified.stderr);
  t.is(verified.stdout.trim(), 'ok: 24 of 24 snapshots rebuilt from 85 events, 0 difference(s)');
  const all = await steps(t, dir);
  t.deepEqual(
    all.map((s) => s.seq),
    Array.from({ length: 85 }, (_, i) => i + 1),
  );
  t.deepEqual(counts(all), {
    'bucket ADMIT': 28,
    'bucket CONFIGURE': 1,
    'bucket TICK': 1,
    'bucket UNDO': 2,
    'call CANCELED': 1,
    'call COMPLETED': 5,
    'call HELD': 2,
    'call INTERRUPTED': 1,
    'call PAY': 2,
    'call QUOTED': 4,
    'call RECEIVED': 10,
    'call REFUSED': 1,
    'call SERVICE_REJECTED': 1,
    'call SETTLED': 2,
    'call STARTED': 1,
    'call TICK': 1,
    'inflight CLEAR': 6,
    'inflight FINISH': 6,
    'inflight START': 7,
    'reply-limiter ADMIT': 3,
  });
  t.deepEqual(finalStates(all), {
    bucket: Array(10).fill('open'),
    call: ['canceled', 'completed', 'completed', 'completed', 'completed', 'completed', 'failed', 'failed', 'rejected', 'rejected'],
    inflight: ['idle', 'idle', 'idle'],
    'reply-limiter': ['open'],
  });
  // The quota's window ended by its deadline; the unpaid quote ended by its own.
  t.deepEqual(ticks(all), [
    ['bucket', 'limited', 'open'],
    ['call', 'quoted', 'failed'],
  ]);
});

test("SPEC §14: the caller's data dir of 2026-12 verifies and replays to the same steps (card-fetch-v2, payment, spend)", async (t) => {
  const dir = await copyOf(t, 'caller');
  const verified = await runBin(['replay', '--verify', '--json', '--data', dir]);
  t.is(verified.code, 0, verified.stderr);
  t.deepEqual(JSON.parse(verified.stdout), { events: 24, snapshots: 6, checked: 6, differences: [], damage: null });
  const all = await steps(t, dir);
  t.deepEqual(counts(all), {
    'card-fetch-v2 NEED': 7,
    'card-fetch-v2 REPLY': 3,
    'card-fetch-v2 TICK': 1,
    'payment AUTHORIZE': 2,
    'payment QUOTE': 4,
    'payment REJECT': 1,
    'payment SETTLED': 2,
    'payment TICK': 1,
    'spend SPEND': 2,
    'spend UNDO': 1,
  });
  t.deepEqual(finalStates(all), { 'card-fetch-v2': ['cached'], payment: ['completed', 'expired', 'failed', 'rejected'], spend: ['open'] });
  t.deepEqual(ticks(all), [
    ['payment', 'quoted', 'expired'],
    ['card-fetch-v2', 'cached', 'idle'],
  ]);
});

test("SPEC §10, §14: the hub's data dir of 2026-12 verifies: its ledger history is whole and in order", async (t) => {
  const dir = await copyOf(t, 'hub');
  const verified = await runBin(['replay', '--verify', '--data', dir]);
  t.is(verified.code, 0, verified.stderr);
  t.is(verified.stdout.trim(), "ok: the ledger's history, 6 entries of 2 accounts, each in order and matching its hash chain");
});

test('SPEC §14, §9, §10: a hub and nodes started on the data dirs of 2026-12 go on: old tasks listed, the deadline left pending fired, new free and paid calls answered, and all still verify', async (t) => {
  const root = await tempDir(t);
  const hubDir = await copyOf(t, 'hub', root);
  const providerDir = await copyOf(t, 'provider', root);
  const callerDir = await copyOf(t, 'caller', root);
  const old = { provider: await steps(t, providerDir), caller: await steps(t, callerDir) };
  // The clock starts two days after the fixture's last event: every deadline it left is overdue.
  const last = Math.max(...[...old.provider, ...old.caller].map((s) => s.event.at));
  const clock = new OffsetClock();
  clock.advance(last + 2 * 86_400_000 - clock.now());
  const hub = await startHub({ dataDir: hubDir, port: 0, now: () => clock.now() });
  t.teardown(() => hub.close());
  // The services and the hub moved: the operator points the configs at them (nothing else changes).
  const run = join(root, 'run');
  await mkdir(run, { mode: 0o700 });
  const service = await startSampleService(join(run, 'svc.sock'), echoHandler);
  const agent = await startSampleService(join(run, 'agent.sock'), (body) => ({ text: `you said: ${(body as { text: string }).text}` }));
  t.teardown(() => Promise.all([service.close(), agent.close()]));
  await repoint(providerDir, hub.url, `unix://${service.socketPath}`, `unix://${agent.socketPath}`);
  await repoint(callerDir, hub.url);
  const provider = await start(t, providerDir, clock);
  const caller = await start(t, callerDir, clock);

  const tasks = JSON.parse((await runCli(['tasks', '--json', '--data', callerDir])).stdout) as {
    capability: string;
    state: string;
    reason: string | null;
  }[];
  t.deepEqual(tasks.map((x) => `${x.capability} ${x.state} ${x.reason}`).sort(), [
    'chat completed null',
    'demo.echo completed null',
    'demo.echo completed null',
    'demo.echo completed null',
    'demo.echo failed interrupted',
    'demo.echo rejected quota_caller_per_min',
    'img.render canceled payment_rejected',
    'img.render failed quote_expired',
    'text.reverse completed null',
    'text.reverse rejected service_rejected',
  ]);
  const aid = JSON.parse((await runCli(['id', '--json', '--data', providerDir])).stdout).aid as string;
  const call = async (cap: string, args: string) =>
    JSON.parse((await runCli(['call', aid, cap, '--args', args, '--json', '--data', callerDir])).stdout);
  t.like(await call('demo.echo', '{"text":"after"}'), { state: 'completed', result: { echo: { text: 'after' } } });
  const paid = await call('text.reverse', '{"text":"again"}');
  t.like(paid, { state: 'completed', payment: { status: 'payment-completed', auto: true, quote: { amount: '4' } } });
  t.regex(paid.receipt, /^bafyrei/);
  t.like(
    JSON.parse((await runCli(['balance', '--json', '--data', callerDir])).stdout),
    { balance: '13' },
    '20 minted, a call at 3 and one at 4 (the failed call was released)',
  );

  await caller.close();
  await provider.close();
  await hub.close();
  for (const dir of [providerDir, callerDir]) {
    const verified = await runBin(['replay', '--verify', '--json', '--data', dir]);
    t.is(verified.code, 0, verified.stderr);
    const result = JSON.parse(verified.stdout);
    t.like(result, { differences: [], damage: null });
    t.true(result.events > (dir === providerDir ? old.provider : old.caller).length, 'the journal went on past the old entries');
  }
  // The deadline the old data dir left pending (the cached card's 24 h) fired first at start, as a TICK.
  const first = (await steps(t, callerDir))[old.caller.length];
  t.like(first, { kind: 'card-fetch-v2', event: { type: 'TICK' }, from: 'cached', to: 'idle' });
  t.true(first!.event.at >= last + 2 * 86_400_000);
  const ledger = await runBin(['replay', '--verify', '--data', hubDir]);
  t.is(ledger.code, 0, ledger.stderr);
  t.regex(ledger.stdout, /^ok: the ledger's history, \d+ entries of 2 accounts/);
});

/** Points a data dir's config at this test's hub and, for the provider, at its services' sockets. */
async function repoint(dir: string, hub: string, serviceUrl?: string, agentUrl?: string): Promise<void> {
  const config = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'));
  config.hub = hub;
  for (const cap of config.modules?.service?.capabilities ?? []) cap.url = serviceUrl;
  if (config.modules?.agent) config.modules.agent.url = agentUrl;
  await writeFile(join(dir, 'config.json'), JSON.stringify(config));
}

/** Starts a daemon on a data dir and waits until its card is published and its relay stream open. */
async function start(t: ExecutionContext, dir: string, clock: OffsetClock): Promise<Daemon> {
  const lines: string[] = [];
  const daemon = await startDaemon(dir, (line) => lines.push(line), { clock });
  let closed = false;
  const close = daemon.close;
  daemon.close = async () => {
    if (!closed) await close();
    closed = true;
  };
  t.teardown(() => daemon.close());
  await daemon.published;
  if (!lines.some((l) => l.startsWith('relay stream open')))
    throw new Error(`the daemon in ${dir} did not open its relay stream:\n${lines.join('\n')}`);
  return daemon;
}
