// Hostile probes of stored data (issue 18, item 2): a flipped byte in LevelDB's write-ahead log, entries
// lost or altered where LevelDB would not notice, a write cut short by a crash, and a data dir written
// before the journal had its hash chain. The node and the hub must refuse to run on acknowledged data
// that is lost or damaged, with one line naming the data dir, the first damaged seq and what to do
// (store/wal.ts, store/chain.ts, src/hub/ledger.ts); a torn, never acknowledged last write is not damage.
import test, { type ExecutionContext } from 'ava';
import { execFile } from 'node:child_process';
import { cp, mkdir, readFile, readdir, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Store, StoreDamagedError, seqKey } from '../../store/db.js';
import { JournalDamagedError } from '../../store/chain.js';
import { scan } from '../../store/wal.js';
import { ActorHost } from '../../src/runtime/host.js';
import { ManualClock } from '../../src/runtime/clock.js';
import { verify } from '../../src/runtime/replay.js';
import { startHub } from '../../src/hub/server.js';
import { HubClient } from '../../src/hub-client/client.js';
import { createIdentity, loadIdentity } from '../../src/identity/store.js';
import { randomHex } from '../../src/util/random.js';
import { BIN, runCli } from '../helpers/cli.js';
import { tempDir } from '../helpers/tmp.js';
import { until } from '../helpers/wait.js';
import { startNet, rawPeer } from '../helpers/net.js';
import { startSampleService } from '../../src/service/sample.js';
import { toBody } from '../../src/protocol/body.js';
import { TASK_SEND, TASK_RESULT } from '../../src/protocol/messages.js';

const T0 = Date.UTC(2026, 11, 1);
const BUCKET = { limit: 1_000_000, windowMs: 60_000 };

/** Runs the built `anet` (which must exit by itself: a process that starts is killed after 50 s, long enough for a loaded CI machine to start and refuse). */
function runExit(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string; killed: boolean }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { timeout: 50_000 }, (err, stdout, stderr) => {
      const e = err as (Error & { code?: number; killed?: boolean }) | null;
      resolve({ code: e ? (typeof e.code === 'number' ? e.code : null) : 0, stdout, stderr, killed: e?.killed ?? false });
    });
  });
}

/** A node's data dir (identity, config with an unreachable hub) whose store is not opened yet. */
async function nodeDir(t: ExecutionContext): Promise<string> {
  const dir = join(await tempDir(t), 'node');
  const init = await runCli(['init', '--data', dir, '--json']);
  if (init.code !== 0) throw new Error(init.stderr);
  await writeFile(join(dir, 'config.json'), JSON.stringify({ hub: 'http://127.0.0.1:1' }));
  return dir;
}

/**
 * `n` events acknowledged one at a time with fsync (as the daemon writes them: one batch each here), then
 * `burst` more sent at once (one large batch), and the process "dies": no close, no final checkpoint.
 */
async function acknowledged(dir: string, n: number, opts: { burst?: number; checkpointEvery?: number } = {}): Promise<void> {
  const clock = new ManualClock(T0);
  const store = await Store.open(dir);
  const host = await ActorHost.start(store, { sync: true, clock, checkpointEvery: opts.checkpointEvery ?? 50_000 });
  for (let i = 0; i < n; i++) await host.send(`b:${i % 7}`, 'bucket', BUCKET, { type: 'ADMIT', n: i });
  if (opts.burst)
    await Promise.all(
      Array.from({ length: opts.burst }, (_, i) => host.send(`c:${i % 50}`, 'bucket', BUCKET, { type: 'ADMIT', n: n + i })),
    );
  await store.close();
}

async function lastLog(dir: string): Promise<string> {
  const logs = (await readdir(dir)).filter((f) => f.endsWith('.log')).sort();
  return join(dir, logs.at(-1)!);
}

/** The physical records of a LevelDB log: [offset, end) of each (log_format.h: 32 KiB blocks, 7-byte headers). */
function records(buf: Buffer): [number, number][] {
  const out: [number, number][] = [];
  for (let block = 0; block < buf.length; block += 32768) {
    const end = Math.min(block + 32768, buf.length);
    for (let off = block; end - off >= 7; ) {
      const next = off + 7 + buf.readUInt16LE(off + 4);
      if (next > end) break;
      out.push([off, next]);
      off = next;
    }
  }
  return out;
}

test("SPEC §14 (hostile): one flipped byte in a node's LevelDB write-ahead log: the daemon refuses to start with one line (data dir, first damaged seq, what to do), replay --verify exits 1 naming it, nothing is changed", async (t) => {
  const dir = await nodeDir(t);
  await acknowledged(dir, 141);
  const log = await lastLog(join(dir, 'store'));
  const bytes = await readFile(log);
  // A byte inside the value of journal entry #70 (its own record: one event per batch here).
  const at = bytes.indexOf(`!journal!${seqKey(70)}`) + 40;
  bytes[at]! ^= 0x04;
  await writeFile(log, bytes);

  const daemon = await runExit(['daemon', '--data', dir]);
  t.false(daemon.killed, 'the daemon started on a damaged store');
  t.is(daemon.code, 1);
  const line = daemon.stderr.trim();
  t.false(line.includes('\n'), line);
  t.true(
    line.startsWith(`anet: the store of ${dir} is damaged: a record that fails its checksum in LevelDB's write-ahead log (store/`),
    line,
  );
  t.regex(line, /holding journal #70 onwards/);
  t.regex(line, new RegExp(`restore ${dir} from a backup made before the damage`));
  t.regex(line, /anet replay --verify/);

  const verified = await runExit(['replay', '--verify', '--data', dir]);
  t.is(verified.code, 1);
  t.is(verified.stderr.trim(), line, 'replay --verify names the same record and seq');
  t.deepEqual(await readFile(log), bytes, 'the damaged log is left for the operator (LevelDB never replayed it)');
});

test('SPEC §14 (hostile): a flip anywhere in the write-ahead log is caught, in one-event batches and in large fragmented ones; 8 of 8 spread flips refuse the open', async (t) => {
  const dir = await nodeDir(t);
  await acknowledged(dir, 141, { burst: 1200 });
  const log = await lastLog(join(dir, 'store'));
  const clean = await readFile(log);
  t.is(scan(clean), null);
  t.true(clean.length > 3 * 32768, 'the burst spans several blocks');
  // Every 7th byte of every record (block trailers are padding LevelDB never reads), one bit each, so
  // that each header field and each stretch of payload is hit; a scan reads the file up to the damage.
  const missed: number[] = [];
  for (const [start, end] of records(clean)) {
    for (let i = start; i < end; i += i - start < 7 ? 1 : 7) {
      const b = Buffer.from(clean);
      b[i]! ^= 1 << (i % 8);
      if (scan(b) === null) missed.push(i);
    }
  }
  t.deepEqual(missed, []);
  // And through Store.open, on copies of the data dir: the 8 flips, none opened.
  const root = await tempDir(t);
  for (let k = 0; k < 8; k++) {
    const copy = join(root, `copy-${k}`);
    await cp(dir, copy, { recursive: true });
    const copyLog = join(copy, 'store', log.slice(log.lastIndexOf('/') + 1));
    const b = Buffer.from(clean);
    b[Math.floor(((k + 0.5) / 8) * b.length)]! ^= 0x20;
    await writeFile(copyLog, b);
    const err = await t.throwsAsync(Store.open(copy), { instanceOf: StoreDamagedError });
    t.true(err!.message.startsWith(`the store of ${copy} is damaged`), err!.message);
  }
});

test('SPEC §14 (hostile): a last write cut short by a crash was never acknowledged and is not damage: the node starts at the last whole batch', async (t) => {
  for (const how of ['kill', 'power'] as const) {
    const dir = await nodeDir(t);
    await acknowledged(dir, 20, { burst: 400 });
    const log = await lastLog(join(dir, 'store'));
    const bytes = await readFile(log);
    if (how === 'kill') {
      // kill -9 between the writes of the last batch: the file ends inside it.
      await truncate(log, bytes.length - 100);
    } else {
      // Power loss: the last batch's pages from a page boundary on were never written and read as zeros.
      const page = records(bytes)
        .reverse()
        .map(([start, end]) => [Math.ceil((start + 8) / 4096) * 4096, end] as const)
        .find(([p, end]) => p < end)![0];
      t.true(page > bytes.length - 40_000, 'inside the last batch (the burst)');
      bytes.fill(0, page);
      await writeFile(log, bytes);
    }
    const store = await Store.open(dir);
    const host = await ActorHost.start(store, { clock: new ManualClock(T0) });
    const seqs = (await store.journal.keys().all()).map(Number);
    t.deepEqual(
      seqs,
      Array.from({ length: 20 }, (_, i) => i + 1),
      `${how}: the 20 acknowledged events, without the torn batch`,
    );
    await host.send('b:0', 'bucket', BUCKET, { type: 'ADMIT' });
    await host.close();
    const r = await verify(store);
    t.is(r.damage, null, how);
    t.deepEqual(r.differences, [], how);
    await store.close();
  }
});

/** A journal with checkpoints (every 16 events), ended by a "crash": entries after the last checkpoint. */
async function journalWithCheckpoint(dir: string): Promise<{ checkpoint: number; last: number }> {
  const clock = new ManualClock(T0);
  const store = await Store.open(dir);
  const host = await ActorHost.start(store, { clock, checkpointEvery: 16 });
  for (let i = 0; i < 60; i++) await host.send(`b:${i % 3}`, 'bucket', { limit: 4, windowMs: 10_000 }, { type: 'ADMIT' });
  await host.idle();
  await store.close();
  const again = await Store.open(dir);
  const checkpoint = (await again.meta.get('checkpoint')) as number;
  const last = (await again.nextSeq()) - 1;
  await again.close();
  return { checkpoint, last };
}

test('SPEC §14 (hostile): entries lost or altered where LevelDB does not notice (its tables): the start refuses past the checkpoint, replay --verify finds them anywhere', async (t) => {
  const root = await tempDir(t);
  const base = join(root, 'base');
  const { checkpoint, last } = await journalWithCheckpoint(base);
  t.true(checkpoint >= 32 && last > checkpoint + 4, `checkpoint ${checkpoint}, last ${last}`);
  const variant = async (name: string, change: (store: Store) => Promise<void>) => {
    const dir = join(root, name);
    await cp(base, dir, { recursive: true });
    const store = await Store.open(dir);
    await change(store);
    await store.close();
    return dir;
  };
  const lost = checkpoint + 2;
  const altered = checkpoint + 3;
  const early = checkpoint - 5;
  const flipValue = (seq: number) => async (store: Store) => {
    const bytes = (await store.journal.get(seqKey(seq), { valueEncoding: 'buffer' })) as Buffer;
    const i = bytes.indexOf('b:') + 2;
    bytes[i] = bytes[i] === 0x31 ? 0x32 : 0x31; // b:1 <-> b:2: still a valid entry, another actor
    await store.journal.put(seqKey(seq), bytes, { valueEncoding: 'buffer' });
  };

  const cases: [string, (store: Store) => Promise<void>, number, RegExp][] = [
    ['lost', (store) => store.journal.del(seqKey(lost)), lost, new RegExp(`entry #${lost} is missing`)],
    ['altered', flipValue(altered), altered, new RegExp(`entry #${altered} does not match its hash`)],
  ];
  for (const [name, change, seq, problem] of cases) {
    const dir = await variant(name, change);
    const store = await Store.open(dir);
    const err = await t.throwsAsync(ActorHost.start(store), { instanceOf: JournalDamagedError });
    t.is(err!.damage.seq, seq);
    t.regex(err!.message, new RegExp(`^the journal in ${dir} is damaged from seq #${seq} \\(`));
    t.regex(err!.message, problem);
    t.regex(err!.message, /restore .* from a backup/);
    t.false(err!.message.includes('\n'));
    await store.close();
    const r = await runCli(['replay', '--verify', '--data', dir]);
    t.is(r.code, 1);
    t.regex(r.stdout, new RegExp(`^damaged: the journal from #${seq}: `, 'm'));
  }

  // Before the checkpoint: its effect is already in the snapshots, so the start (which reads from the
  // checkpoint on) runs; replay --verify, which reads everything, names it.
  const dir = await variant('early', flipValue(early));
  const store = await Store.open(dir);
  const host = await ActorHost.start(store, { clock: new ManualClock(T0) });
  await host.close();
  await store.close();
  const r = await runCli(['replay', '--verify', '--data', dir]);
  t.is(r.code, 1);
  t.regex(r.stdout, new RegExp(`^damaged: the journal from #${early}: entry #${early} does not match its hash`, 'm'));
});

test('SPEC §14 (hostile): a data dir written before the hash chain (test/fixtures/journal-v1) starts, goes on and verifies; the chain starts at the first entry written now, and continuity still guards the old entries', async (t) => {
  const fixture = fileURLToPath(new URL('../fixtures/journal-v1/store', import.meta.url));
  const root = await tempDir(t);
  const dir = join(root, 'node');
  await cp(fixture, join(dir, 'store'), { recursive: true });
  const clock = new ManualClock(Date.UTC(2026, 10, 1, 1));
  let store = await Store.open(dir);
  t.is(store.chainStart, undefined);
  t.is(await store.nextSeq(), 47);
  t.is(await store.meta.get('checkpoint'), 32);
  const host = await ActorHost.start(store, { clock });
  await host.send('b:0', 'bucket', { limit: 4, windowMs: 10_000 }, { type: 'ADMIT' });
  await host.send('inflight:x', 'inflight', { max: 2 }, { type: 'START', id: 'new' });
  await host.close();
  await store.close();
  store = await Store.open(dir);
  t.is(store.chainStart, 47, 'the chain starts at the first entry written by this version');
  const r = await verify(store);
  t.is(r.damage, null);
  t.deepEqual(r.differences, []);
  t.true(r.events >= 48, `${r.events} events`);
  await store.close();
  t.is((await runCli(['replay', '--verify', '--data', dir])).code, 0);
  // Restarts go on.
  store = await Store.open(dir);
  await (await ActorHost.start(store, { clock })).close();
  await store.close();

  // An old entry lost past the old checkpoint: continuity is checked without a chain.
  const gap = join(root, 'gap');
  await cp(fixture, join(gap, 'store'), { recursive: true });
  store = await Store.open(gap);
  await store.journal.del(seqKey(40));
  const err = await t.throwsAsync(ActorHost.start(store, { clock }), { instanceOf: JournalDamagedError });
  t.is(err!.damage.seq, 40);
  await store.close();
});

test("SPEC §11 (hostile): one flipped byte in the hub's write-ahead log after 40 fsynced mints: `anet hub start` refuses with one line, and replay --verify on the hub's data dir exits 1 naming the account and seq", async (t) => {
  const root = await tempDir(t);
  const hubDir = join(root, 'hub');
  const hub = await startHub({ dataDir: hubDir, port: 0 });
  // Closed in the test once the mints are in; a failure before that must not leave it open (the worker
  // would never exit).
  let hubOpen = true;
  t.teardown(async () => {
    if (hubOpen) await hub.close();
  });
  const agent = await createIdentity(join(root, 'agent'), Date.now());
  await new HubClient(hub.url, agent, Date.now).register('agent', null);
  const operator = new HubClient(hub.url, await loadIdentity(hubDir), Date.now);
  for (let i = 0; i < 40; i++) await operator.mint(agent.aid, '5', randomHex(16));
  t.is((await hub.ledger.account(agent.aid)).balance, '200');
  hubOpen = false;
  await hub.close();

  const log = await lastLog(join(hubDir, 'hub-store'));
  const bytes = await readFile(log);
  const at = bytes.indexOf(`!history!${agent.aid}!${seqKey(20)}`);
  t.true(at > 0);
  bytes[at + 90]! ^= 0x10;
  await writeFile(log, bytes);

  const started = await runExit(['hub', 'start', '--port', '0', '--data', hubDir]);
  t.false(started.killed, 'the hub started on a damaged store');
  t.is(started.code, 1);
  const line = started.stderr.trim();
  t.false(line.includes('\n'), line);
  t.true(
    line.startsWith(`anet: the store of ${hubDir} is damaged: a record that fails its checksum in LevelDB's write-ahead log (hub-store/`),
    line,
  );
  t.regex(line, new RegExp(`holding the ledger history of ${agent.aid} at seq 20 onwards`));
  t.regex(line, new RegExp(`restore ${hubDir} from a backup`));

  const verified = await runExit(['replay', '--verify', '--data', hubDir]);
  t.is(verified.code, 1);
  t.is(verified.stderr.trim(), line);
  t.deepEqual(await readFile(log), bytes, 'nothing was replayed or rewritten');
});

test('SPEC §9.5, §14 (hostile): the same envelope delivered again after its mid record was lost is answered from the journal, not run again', async (t) => {
  const net = await startNet(t);
  let runs = 0;
  const run = join(net.root, 'run');
  await mkdir(run, { mode: 0o700 });
  const service = await startSampleService(join(run, 'svc.sock'), (body) => {
    runs++;
    return { echo: body };
  });
  t.teardown(() => service.close());
  const p = await net.node('p', {
    inbound: { policy: 'open', public_capabilities: [{ id: 'demo.echo' }] },
    modules: { service: { capabilities: [{ id: 'demo.echo', url: `unix://${service.socketPath}` }] } },
  });
  let daemon = await net.start(p.dir);
  const x = await rawPeer(t, net, 'x');
  const task = '00000000000000e1';
  const results = () => x.received.filter((m) => m.body.task === task && m.type === TASK_RESULT).map((m) => m.body);
  const sealed = await x.messenger.seal(p.aid, TASK_SEND, toBody({ task, capability: 'demo.echo', args: '{"n":1}' }));
  await x.messenger.deliver(sealed);
  await until(() => results().length === 1, 'the result', 250);
  t.is(runs, 1);
  await daemon.close();
  // The replay guard's records are unsynced: lose them all, as a crash or a damaged table could.
  const store = await Store.open(p.dir);
  await store.mids.clear();
  await store.close();
  daemon = await net.start(p.dir);
  await x.messenger.deliver(sealed); // the very same bytes, mid and all
  await until(() => results().length === 2, 'the answer to the copy', 250);
  t.is(runs, 1, "the call actor's RECEIVED (journaled, checked at start) answers it; nothing ran again");
  t.deepEqual(results()[1], results()[0]);
});
