// SPEC §11 (the hub) run on its own: the built `anet-hub` (dist/src/hub/bin.js) starts, a node registers
// and publishes its key set, the operator mints through the running hub, and the hub process has loaded
// none of the node's code: no file outside the layers the hub builds on (docs/ARCHITECTURE.md, Layers)
// and not the MCP SDK. An ESM loader hook in the hub process logs every module it resolves; a node module
// imported into the hub fails this test as well as the layer check. SPEC §12: its exit codes.
import test, { type ExecutionContext } from 'ava';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { tempDir } from './helpers/tmp.js';
import { createIdentity, loadIdentity } from '../src/identity/store.js';
import { HubClient } from '../src/hub-client/client.js';
import { currentKeys, signKeySet } from '../src/relay/keyset.js';

const HUB_BIN = fileURLToPath(new URL('../dist/src/hub/bin.js', import.meta.url));
const DIST = fileURLToPath(new URL('../dist/', import.meta.url));

/** What the hub may load of ours: its own files and the layers below it. */
const HUB_LAYERS = /^(src\/(hub|util|identity|protocol|runtime|bus)\/|store\/)/;

// Runs in the hub's main thread: hands the log's path to the hooks (their own thread), and notes the
// CommonJS loads a package makes with require(), which Node 20's ESM hooks do not see.
const REGISTER = `
import { register, createRequire } from 'node:module';
import { appendFileSync } from 'node:fs';
const log = process.env.ANET_LOAD_LOG;
register('./hooks.mjs', import.meta.url, { data: { log } });
const Module = createRequire(import.meta.url)('node:module');
const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function (...args) {
  const file = resolveFilename.apply(this, args);
  appendFileSync(log, 'cjs:' + file + '\\n');
  return file;
};
`;
const HOOKS = `
import { appendFileSync } from 'node:fs';
let log;
export function initialize(data) { log = data.log; }
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  appendFileSync(log, resolved.url + '\\n');
  return resolved;
}
`;

/** Starts `anet-hub start` on a loopback port with the loader hook; its URL, its log, and how to stop it. */
async function startHubBin(t: ExecutionContext, root: string) {
  await writeFile(join(root, 'register.mjs'), REGISTER);
  await writeFile(join(root, 'hooks.mjs'), HOOKS);
  const log = join(root, 'loaded.log');
  const dataDir = join(root, 'hub');
  const child = spawn(process.execPath, ['--import', join(root, 'register.mjs'), HUB_BIN, 'start', '--data', dataDir, '--port', '0'], {
    env: { ...process.env, ANET_LOAD_LOG: log },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = once(child, 'exit');
  t.teardown(() => void child.kill('SIGKILL'));
  const output: string[] = [];
  createInterface({ input: child.stderr! }).on('line', (line) => output.push(line));
  const lines = createInterface({ input: child.stdout! });
  const url = await new Promise<string>((resolve, reject) => {
    lines.on('line', (line) => {
      output.push(line);
      const ready = /^anet hub: ready on (\S+);/.exec(line);
      if (ready) resolve(ready[1]!);
    });
    child.once('exit', () => reject(new Error(`anet-hub exited before it was ready:\n${output.join('\n')}`)));
  });
  const stop = async () => {
    child.kill('SIGTERM');
    const [code] = await exited;
    return { code: code as number | null, output };
  };
  return { url, dataDir, log, stop };
}

/** The modules a log names: ours relative to dist/, packages by name. */
function modulesOf(log: string): { ours: Set<string>; packages: Set<string> } {
  const ours = new Set<string>();
  const packages = new Set<string>();
  for (const line of log.split('\n')) {
    // ESM: a URL (node:… for builtins); CommonJS: cjs:<path> (a bare name for builtins).
    const path = line.startsWith('file://') ? fileURLToPath(line) : line.startsWith('cjs:/') ? line.slice(4) : null;
    if (path === null) continue;
    const pkg = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(path);
    if (pkg) packages.add(pkg[1]!);
    else if (path.startsWith(DIST)) ours.add(path.slice(DIST.length));
  }
  return { ours, packages };
}

test('SPEC §11: anet-hub runs the hub alone: a node registers, the operator mints through it, and it never loads node code or the MCP SDK', async (t) => {
  const root = await tempDir(t);
  const hub = await startHubBin(t, root);
  const node = join(root, 'node');
  await createIdentity(node, Date.now());
  const identity = await loadIdentity(node);
  const client = new HubClient(hub.url, identity);
  await client.register('bin-test', null);
  const { keys } = await currentKeys(node, Date.now());
  await client.putKeys(signKeySet(identity, keys));
  t.is((await client.search({})).agents.length, 0, 'registered without a card: nothing listed');

  const mint = spawnSync(process.execPath, [HUB_BIN, 'mint', identity.aid, '5', '--data', hub.dataDir, '--json'], { encoding: 'utf8' });
  t.is(mint.status, 0, mint.stderr);
  t.like(JSON.parse(mint.stdout), { aid: identity.aid, amount: '5', balance: '5', via: 'hub', url: hub.url });
  t.is((await client.account(identity.aid)).balance, '5');

  const { code, output } = await hub.stop();
  t.is(code, 0, output.join('\n'));
  t.true(output.includes('anet hub: stopped'));
  const { ours, packages } = modulesOf(await readFile(hub.log, 'utf8'));
  t.true(ours.has('src/hub/server.js') && ours.has('src/hub/relay.js'), `the hook saw the hub's own modules: ${[...ours].join(' ')}`);
  t.deepEqual(
    [...ours].filter((file) => !HUB_LAYERS.test(file)),
    [],
    'the hub loads only its own files and the layers below it',
  );
  t.false(
    [...packages].some((name) => name.startsWith('@modelcontextprotocol/')),
    `packages loaded: ${[...packages].join(' ')}`,
  );
  // Issue 19: the PostgreSQL client and NATS are loaded only by a hub started with --db / --bus.
  t.false(
    [...packages].some((name) => name === 'postgres' || name.startsWith('@nats-io/')),
    `the embedded hub loaded a replica's packages: ${[...packages].join(' ')}`,
  );
  t.log(`anet-hub start loaded ${ours.size} of our files and ${packages.size} packages: ${[...packages].sort().join(' ')}`);
});

test('SPEC §12: anet-hub help, and a usage error exits 2 naming anet-hub help', (t) => {
  const help = spawnSync(process.execPath, [HUB_BIN, 'help'], { encoding: 'utf8' });
  t.is(help.status, 0);
  t.regex(help.stdout, /^usage: anet-hub <command>/);
  const bad = spawnSync(process.execPath, [HUB_BIN, 'start', '--port', 'x'], { encoding: 'utf8' });
  t.is(bad.status, 2);
  t.is(bad.stderr, 'anet-hub: --port takes a port number (0 picks a free one) (see `anet-hub help`)\n');
  // Issue 19: the storage flags are checked before anything starts.
  const usage = (...args: string[]) => spawnSync(process.execPath, [HUB_BIN, 'start', ...args], { encoding: 'utf8' });
  for (const [args, line] of [
    [['--bus', 'nats://127.0.0.1:4222'], /^anet-hub: --bus needs --db: replicas share one PostgreSQL/],
    [['--db', 'mysql://x'], /^anet-hub: --db takes a PostgreSQL URL \(postgres:\/\/user:password@host:5432\/database\), not "mysql:\/\/x"/],
    [['--mailbox-ttl', '8d'], /^anet-hub: --mailbox-ttl takes a duration from 1m to 7d/],
    [['--mailbox-ttl', 'soon'], /^anet-hub: --mailbox-ttl takes a duration from 1m to 7d/],
  ] as const) {
    const r = usage(...args);
    t.is(r.status, 2, r.stderr);
    t.regex(r.stderr, line);
    t.is(r.stderr.trim().split('\n').length, 1, 'one line');
  }
  const mint = spawnSync(process.execPath, [HUB_BIN, 'mint', 'nota'], { encoding: 'utf8' });
  t.is(mint.status, 2);
  t.regex(mint.stderr, /^anet-hub: hub mint needs an AID and an amount/);
});
