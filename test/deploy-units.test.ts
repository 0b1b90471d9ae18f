// docs/OPERATIONS.md §1, §2 (issue 22): the systemd units in deploy/systemd run as written. Each unit's
// ExecStart (its paths mapped to this clone and a temporary data dir, its fixed ports to free ones) starts
// the built program, which comes up, and stops cleanly (exit 0) on the unit's KillSignal within its
// TimeoutStopSec — what systemd will do at every stop and upgrade.
import test from 'ava';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startNet } from './helpers/net.js';
import { until } from './helpers/wait.js';

const REPO = fileURLToPath(new URL('..', import.meta.url));
const UNITS = join(REPO, 'deploy', 'systemd');

interface Unit {
  execStart: string[];
  environment: Record<string, string>;
  killSignal: NodeJS.Signals;
  timeoutStopSec: number;
}

/** The [Service] keys a test needs, read as systemd would (one value a line, `Environment=K=V` pairs). */
async function readUnit(name: string): Promise<Unit> {
  const lines = (await readFile(join(UNITS, name), 'utf8')).split('\n').filter((l) => !l.startsWith('#'));
  const value = (key: string) => lines.find((l) => l.startsWith(`${key}=`))?.slice(key.length + 1);
  const environment = Object.fromEntries(
    lines
      .filter((l) => l.startsWith('Environment='))
      .map((l) => l.slice('Environment='.length).split(/=(.*)/s).slice(0, 2) as [string, string]),
  );
  return {
    execStart: value('ExecStart')!.split(/\s+/),
    environment,
    killSignal: (value('KillSignal') ?? 'SIGTERM') as NodeJS.Signals,
    timeoutStopSec: Number(value('TimeoutStopSec') ?? 90),
  };
}

/** The unit's words made this clone's: %h/anet and /opt/anet are the repository, the data dirs temporary ones. */
const mapped = (word: string, home: string, hubData: string) =>
  word
    .replace('%h/anet/', REPO)
    .replace('/opt/anet/', REPO)
    .replace('%h/.anet', join(home, '.anet'))
    .replace('/var/lib/anet-hub', hubData)
    .replace(/^127\.0\.0\.1:\d+$/, '127.0.0.1:0');

function start(cmd: string[], env: Record<string, string>): { child: ChildProcess; exit: Promise<number | null>; output: () => string } {
  const child = spawn(cmd[0]!, cmd.slice(1), { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (c) => (output += c));
  child.stderr!.on('data', (c) => (output += c));
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exit, output: () => output };
}

async function stops(unit: Unit, run: ReturnType<typeof start>): Promise<number | null> {
  run.child.kill(unit.killSignal);
  const timeout = new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), unit.timeoutStopSec * 1000).unref());
  const code = await Promise.race([run.exit, timeout]);
  if (code === 'timeout') run.child.kill('SIGKILL');
  return code === 'timeout' ? -1 : code;
}

test('OPERATIONS §2 (issue 22): anet-hub.service runs the hub as written, and SIGTERM stops it cleanly', async (t) => {
  const unit = await readUnit('anet-hub.service');
  const net = await startNet(t);
  const hubData = join(net.root, 'var-lib-anet-hub');
  const cmd = unit.execStart.map((w) => mapped(w, net.root, hubData)).map((w, i, all) => (all[i - 1] === '--port' ? '0' : w));
  t.is(cmd[0], '/usr/bin/node');
  const run = start([process.execPath, ...cmd.slice(1)], {});
  await until(() => existsSync(join(hubData, 'hub.json')) || run.child.exitCode !== null, 'the hub to start', 500);
  t.true(existsSync(join(hubData, 'hub.json')), run.output());
  t.is(await stops(unit, run), 0, run.output());
});

test('OPERATIONS §1 (issue 22): anet.service runs the node daemon as written (metrics on loopback), and SIGTERM stops it cleanly', async (t) => {
  const unit = await readUnit('anet.service');
  const net = await startNet(t);
  const home = join(net.root, 'home');
  const env = Object.fromEntries(Object.entries(unit.environment).map(([k, v]) => [k, mapped(v, home, '')]));
  const dataDir = env.ANET_DATA_DIR!;
  t.is(dataDir, join(home, '.anet'));
  const init = start([process.execPath, join(REPO, 'dist/src/cli/bin.js'), 'init'], env);
  t.is(await init.exit, 0, init.output());
  await net.configure(dataDir, {});
  const cmd = unit.execStart.map((w) => mapped(w, home, ''));
  t.deepEqual(cmd.slice(2), ['daemon', '--metrics', '127.0.0.1:0']);
  const run = start([process.execPath, ...cmd.slice(1)], env);
  // Ready once it says so: its stop handling is in place from then on.
  await until(() => run.output().includes('anet daemon: ready;') || run.child.exitCode !== null, 'the daemon to start', 1000);
  t.regex(run.output(), /anet daemon: ready;/);
  t.true(existsSync(join(dataDir, 'control.sock')), run.output());
  t.is(await stops(unit, run), 0, run.output());
});
