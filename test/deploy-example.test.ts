// deploy/examples/service-files (SPEC §2, §3, §9): the example adapter and config run as documented —
// the adapter on a Unix socket with a bearer token, the node's config from the example file — and a call
// from another node gets the adapter's answer, or its own words when it refuses — and its README.md, run
// as written from a fresh home, does the same.
import test from 'ava';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import stripJsonComments from 'strip-json-comments';
import { startNet } from './helpers/net.js';
import { BIN, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { until } from './helpers/wait.js';
import { codeBlocks, groupAlive, runBash } from './helpers/readme-shell.js';

const EXAMPLE = fileURLToPath(new URL('../deploy/examples/service-files/', import.meta.url));
const REPO = fileURLToPath(new URL('..', import.meta.url));

test('SPEC §2, §3, §9 (deploy example): the adapter and config.json serve text.wordcount to another node, and doctor is clean', async (t) => {
  const net = await startNet(t);
  const run = join(net.root, 'run');
  await mkdir(run, { mode: 0o700 });
  const socket = join(run, 'anet', 'wordcount.sock');
  const tokenFile = join(net.root, 'wordcount.token');
  await writeFile(tokenFile, 'an-example-token-of-24-bytes\n', { mode: 0o600 });
  const adapter = spawn(process.execPath, [join(EXAMPLE, 'adapter.mjs')], {
    env: { ...process.env, ANET_SOCKET: socket, ANET_TOKEN_FILE: tokenFile },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  t.teardown(() => void adapter.kill());
  await new Promise<void>((resolve) => adapter.stdout!.on('data', (d) => String(d).includes('listening') && resolve()));

  const config = JSON.parse(stripJsonComments(await readFile(join(EXAMPLE, 'config.json'), 'utf8')));
  const cap = config.modules.service.capabilities[0];
  cap.url = `unix://${socket}`;
  cap.token_file = tokenFile;
  const p = await net.node('provider', { inbound: config.inbound, modules: config.modules });
  const doctor = await runCli(['doctor', '--data', p.dir]);
  t.is(doctor.code, 0, doctor.stdout + doctor.stderr);
  const c = await net.node('caller');
  await net.start(p.dir);
  await net.start(c.dir);

  const ok = await runCli(['call', p.aid, 'text.wordcount', '--args', '{"text": "the quick brown fox"}', '--json', '--data', c.dir]);
  t.is(ok.code, 0, ok.stderr);
  t.like(JSON.parse(ok.stdout), { state: 'completed', result: { words: 4, chars: 19 } });
  const refused = await runCli(['call', p.aid, 'text.wordcount', '--args', '{"text": 5}', '--data', c.dir]);
  t.is(refused.code, 1);
  t.regex(refused.stdout, /^rejected: service_rejected: args.text must be a string/);
});

test('SPEC §10: a priced capability is never run for free: a caller without credits is quoted, its hold refused, the service never called', async (t) => {
  const net = await startNet(t);
  let ran = false;
  const run = join(net.root, 'run');
  await mkdir(run, { mode: 0o700 });
  const { startSampleService } = await import('../src/service/sample.js');
  const service = await startSampleService(join(run, 's.sock'), () => {
    ran = true;
    return {};
  });
  t.teardown(() => service.close());
  const p = await net.node('p', {
    inbound: { public_capabilities: [{ id: 'paid.thing' }] },
    modules: { service: { capabilities: [{ id: 'paid.thing', url: `unix://${service.socketPath}`, price: 5 }] } },
  });
  const c = await net.node('c');
  await net.start(p.dir);
  await net.start(c.dir);
  const r = JSON.parse((await runCli(['call', p.aid, 'paid.thing', '--args', '{}', '--json', '--data', c.dir])).stdout);
  t.like(r, {
    state: 'failed',
    reason: 'settlement_failed',
    detail: 'the hub refused: INSUFFICIENT_FUNDS',
    payment: { quote: { amount: '5' }, status: 'payment-failed' },
  });
  t.false(ran);
});

/** A loopback port free a moment ago. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

// The walk-through in README.md, followed literally: its ```sh and ```sh systemd blocks are joined, in
// order, into one bash script (`-eux -o pipefail`: the first failing command fails the test), run from the
// root of this checkout with a fresh HOME, no XDG_RUNTIME_DIR (a machine without a systemd session), a PATH
// with node and the system tools but no `anet` (step 0 puts it there) and a free ANET_HUB_PORT. Only the
// ```sh build block is not run (the checkout is built already). The programs the README starts with `&`
// are in the script's process group, which t.teardown ends.
test('SPEC §2, §3, §3.2, §9 (deploy example README): the walk-through, run as written in a fresh home, serves text.wordcount to a second node', async (t) => {
  t.timeout(90_000);
  t.true(existsSync(BIN), `no ${BIN}: run \`npm run build\` first (the README's wrapper runs this checkout's build)`);
  const blocks = codeBlocks(await readFile(join(EXAMPLE, 'README.md'), 'utf8'));
  // Every block says what it is, so none is skipped by accident.
  for (const b of blocks)
    t.true(
      ['sh', 'sh systemd', 'sh build', 'text'].includes(b.info),
      `README.md:${b.line}: a code block fenced \`\`\`${b.info}, not sh, sh systemd, sh build or text`,
    );
  // The one block not run: the build, which is this checkout's.
  t.deepEqual(
    blocks.filter((b) => b.info === 'sh build').map((b) => b.code),
    ['npm install\nnpm run build\n'],
  );
  const steps = blocks.filter((b) => b.info === 'sh' || b.info === 'sh systemd');
  t.true(steps.some((b) => b.info === 'sh') && steps.some((b) => b.info === 'sh systemd'));

  const root = await tempDir(t, 'anet-readme-');
  const home = join(root, 'home');
  const bin = join(root, 'bin');
  await mkdir(home, { mode: 0o700 });
  await mkdir(bin);
  await symlink(process.execPath, join(bin, 'node'));
  // systemd cannot run here: this systemctl records its arguments, and the "without systemd" blocks start the programs.
  const systemctlLog = join(root, 'systemctl.log');
  await writeFile(join(bin, 'systemctl'), `#!/bin/sh\necho "$*" >> '${systemctlLog}'\n`);
  await chmod(join(bin, 'systemctl'), 0o755);
  const port = await freePort();
  const script = steps.map((b) => `# README.md:${b.line} (${b.info})\n${b.code}`).join('\n');
  const run = await runBash(t, script, {
    cwd: REPO,
    env: { HOME: home, PATH: `${bin}:/usr/bin:/bin`, ANET_HUB_PORT: String(port) },
    ms: 60_000,
  });
  const logs = async () => {
    const out: string[] = [];
    for (const f of ['anet-wordcount.log', 'anet-hub.log', 'anet-daemon.log'])
      out.push(`--- ~/${f}\n${await readFile(join(home, f), 'utf8').catch(() => '(none)')}`);
    return out.join('\n');
  };
  const story = async () =>
    `stdout:\n${run.stdout}\nstderr (last 40 lines):\n${run.stderr.split('\n').slice(-40).join('\n')}\n${await logs()}`;
  if (run.timedOut) return t.fail(`the README did not finish in 60 s\n${await story()}`);
  t.is(run.code, 0, await story());

  // Step 4: doctor is clean; step 7: the call went through the adapter, with the provider's receipt.
  t.regex(run.stdout, /^ok: no problems found$/m);
  t.regex(run.stdout, / free +confirmed +text\.wordcount +bafyrei\S+$/m);
  t.regex(run.stdout, /^\{\n {2}"words": 4,\n {2}"chars": 19\n\}$/m);
  t.regex(run.stdout, /^receipt bafyrei\S+ \(signed by the provider, verified\)$/m);
  t.regex(await readFile(join(home, 'anet-wordcount.log'), 'utf8'), /^call \S+ from bafyrei\S+: 19 chars$/m);
  // Step 8: `kill $(jobs -p)` ended the hub, the adapter and the node, cleanly.
  await until(() => !groupAlive(run.pgid), 'the programs the README started to stop', 250);
  t.regex(await readFile(join(home, 'anet-daemon.log'), 'utf8'), /^anet daemon: stopped$/m);
  t.regex(await readFile(join(home, 'anet-hub.log'), 'utf8'), /^anet hub: stopped$/m);

  // The systemd blocks: the calls they make, and units whose ExecStart names a node and a script that exist.
  t.deepEqual((await readFile(systemctlLog, 'utf8')).trim().split('\n'), [
    '--user daemon-reload',
    '--user enable --now anet-wordcount',
    '--user daemon-reload',
    '--user enable --now anet',
    '--user disable --now anet anet-wordcount',
  ]);
  for (const unit of ['anet-wordcount.service', 'anet.service']) {
    const text = await readFile(join(home, '.config/systemd/user', unit), 'utf8');
    const [node, file] = /^ExecStart=(.*)$/m.exec(text)![1]!.split(' ');
    t.true(existsSync(node!) && existsSync(file!), `${unit}: ExecStart=${node} ${file}`);
  }
});
