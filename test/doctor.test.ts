// SPEC §2, §2.2 (token files), §3.2 (socket safety): `anet doctor` against real sockets and files. Doctor
// reports the problems of every stage (schema, cross-field, environment, identity) in one run.
import test, { type ExecutionContext } from 'ava';
import { mkdir, writeFile, chmod, chown } from 'node:fs/promises';
import { join } from 'node:path';
import { tempDir } from './helpers/tmp.js';
import { runBin, runCli } from './helpers/cli.js';
import { startSampleService, echoHandler } from '../src/service/sample.js';
import { createIdentity } from '../src/identity/store.js';

const isRoot = process.getuid?.() === 0;
const NOBODY = 65534;

async function nodeWith(t: ExecutionContext, config: object): Promise<string> {
  const data = await tempDir(t);
  await writeFile(join(data, 'config.json'), JSON.stringify(config));
  return data;
}

function offering(id: string, url: string, extra: object = {}) {
  return {
    inbound: { public_capabilities: [{ id }] },
    modules: { service: { capabilities: [{ id, url, ...extra }] } },
  };
}

async function privateSocket(t: ExecutionContext, name = 'svc.sock'): Promise<string> {
  const dir = join(await tempDir(t), 'run');
  await mkdir(dir, { mode: 0o700 });
  const service = await startSampleService(join(dir, name), echoHandler);
  t.teardown(() => service.close());
  return service.socketPath;
}

test('SPEC §3.2: a healthy socket and token file give no problems and exit 0', async (t) => {
  const socket = await privateSocket(t);
  const token = join(await tempDir(t), 'token');
  await writeFile(token, 'a-sixteen-byte-token\n', { mode: 0o600 });
  const data = await nodeWith(t, offering('echo', `unix://${socket}`, { token_file: token }));
  const r = await runCli(['doctor', '--data', data]);
  t.is(r.code, 0, r.stdout);
  t.is(r.stdout, 'ok: no problems found');
});

test('SPEC §3.2: a missing socket is reported (warning, exit 0)', async (t) => {
  const dir = await tempDir(t);
  const data = await nodeWith(t, offering('echo', `unix://${dir}/absent.sock`));
  const r = await runCli(['doctor', '--data', data]);
  t.is(r.code, 0);
  t.regex(r.stdout, /^warning: config.json modules.service.capabilities\[0\].url: no socket at .*absent.sock/m);
});

test('SPEC §3.2: a socket in a directory other users can write to is an error (exit 1)', async (t) => {
  const dir = join(await tempDir(t), 'open');
  await mkdir(dir);
  await chmod(dir, 0o777);
  const service = await startSampleService(join(dir, 'svc.sock'), echoHandler);
  t.teardown(() => service.close());
  const data = await nodeWith(t, offering('echo', `unix://${service.socketPath}`));
  const r = await runCli(['doctor', '--data', data]);
  t.is(r.code, 1);
  t.regex(r.stdout, /^error: config.json modules.service.capabilities\[0\].url: .*writable by other users/m);

  // Sticky and owned by the daemon's user (or root) is safe, like /tmp.
  await chmod(dir, 0o1777);
  const sticky = await runCli(['doctor', '--data', data]);
  t.is(sticky.code, 0, sticky.stdout);
});

(isRoot ? test : test.skip)('SPEC §3.2: a socket owned by another user is an error', async (t) => {
  const socket = await privateSocket(t);
  await chown(socket, NOBODY, NOBODY);
  const data = await nodeWith(t, offering('echo', `unix://${socket}`));
  const r = await runCli(['doctor', '--data', data]);
  t.is(r.code, 1);
  t.regex(r.stdout, new RegExp(`owned by uid ${NOBODY}, not the daemon's uid`));
});

test('SPEC §3.2: a path that is not a socket is an error', async (t) => {
  const dir = join(await tempDir(t), 'run');
  await mkdir(dir, { mode: 0o700 });
  await writeFile(join(dir, 'svc.sock'), 'not a socket');
  const data = await nodeWith(t, offering('echo', `unix://${dir}/svc.sock`));
  const r = await runCli(['doctor', '--data', data]);
  t.is(r.code, 1);
  t.regex(r.stdout, /is not a socket/);
});

test('SPEC §2.2: token files readable by others or shorter than 16 bytes are errors', async (t) => {
  const socket = await privateSocket(t);
  const dir = await tempDir(t);
  const loose = join(dir, 'loose');
  const short = join(dir, 'short');
  await writeFile(loose, 'a-sixteen-byte-token', { mode: 0o644 });
  await chmod(loose, 0o644);
  await writeFile(short, 'fifteen-bytes!!\n', { mode: 0o600 });
  const config = offering('echo', `unix://${socket}`, { token_file: short });
  (config.modules.service as any).token_file = loose;
  const data = await nodeWith(t, config);
  const r = await runCli(['doctor', '--data', data]);
  t.is(r.code, 1);
  t.regex(r.stdout, /^error: config.json modules.service.token_file: .*accessible to other users \(mode 644\); run chmod 600/m);
  t.regex(r.stdout, /^error: config.json modules.service.capabilities\[0\].token_file: .*shorter than 16 bytes/m);
  t.regex(r.stdout, /2 error\(s\), 0 warning\(s\)$/);
});

test("SPEC §12: the local A2A endpoint's token file is checked too: readable by others is an error, none yet is fine", async (t) => {
  const data = await nodeWith(t, {});
  const none = await runCli(['doctor', '--data', data]);
  t.is(none.code, 0, none.stdout);
  t.notRegex(none.stdout, /a2a\.token/);
  const path = join(data, 'a2a.token');
  await writeFile(path, `${'ab'.repeat(32)}\n`, { mode: 0o644 });
  await chmod(path, 0o644);
  const loose = await runCli(['doctor', '--data', data]);
  t.is(loose.code, 1);
  t.regex(
    loose.stdout,
    /^error: a2a\.token: .*accessible to other users \(mode 644\); run chmod 600 .*; the local A2A endpoint will not start until it is fixed/m,
  );
  await chmod(path, 0o600);
  t.is((await runCli(['doctor', '--data', data])).code, 0);
});

test('SPEC §2: doctor prints each config problem with its path, one line each, and --json', async (t) => {
  const socket = await privateSocket(t);
  const data = await nodeWith(t, {
    inbound: {
      public_capabilities: [{ id: 'echo', max_inflight: 1, per_caller_inflight: 2 }, { id: 'orphan' }, { id: 'chat' }],
    },
    modules: {
      service: {
        capabilities: [
          // biome-ignore lint/correctness/noPrecisionLoss: 2^63, one past the largest price (a double holds it exactly)
          { id: 'echo', url: `unix://${socket}`, price: 9223372036854775808 },
          { id: 'web', url: 'http://127.0.0.1:1/x' },
        ],
      },
    },
  });
  // A price out of range does not stop the cross-field rules: one run reports everything.
  const r = await runCli(['doctor', '--data', data]);
  t.is(r.code, 1);
  t.deepEqual(r.stdout.split('\n'), [
    'error: config.json inbound.public_capabilities[0].per_caller_inflight: 2 exceeds max_inflight 1',
    'warning: config.json inbound.public_capabilities[1].id: "orphan" is not offered: no modules.service.capabilities entry serves it',
    'error: config.json inbound.public_capabilities[2].id: "chat" is reserved for text tasks; choose another id',
    'error: config.json modules.service.capabilities[0].price: must be between 0 and 9223372036854775807',
    'warning: config.json modules.service.capabilities[1].id: "web" is not offered: it is not in inbound.public_capabilities',
    'error: config.json modules.service.capabilities[1].url: http(s) URLs need modules.service.allow_tcp: true; prefer a unix socket',
    '4 error(s), 2 warning(s)',
  ]);
  const report = JSON.parse((await runCli(['doctor', '--data', data, '--json'])).stdout);
  t.deepEqual(
    report.problems.map((p: any) => p.path),
    [
      'inbound.public_capabilities[0].per_caller_inflight',
      'inbound.public_capabilities[1].id',
      'inbound.public_capabilities[2].id',
      'modules.service.capabilities[0].price',
      'modules.service.capabilities[1].id',
      'modules.service.capabilities[1].url',
    ],
  );
  t.like(report, { errors: 4, warnings: 2 });
});

/** One file with a problem of every stage: schema, cross-field and environment. */
async function nodeWithEveryStage(t: ExecutionContext): Promise<{ data: string; openDir: string }> {
  const openDir = join(await tempDir(t), 'open');
  await mkdir(openDir);
  await chmod(openDir, 0o777); // writable by others and not sticky
  const service = await startSampleService(join(openDir, 'svc.sock'), echoHandler);
  t.teardown(() => service.close());
  const data = await nodeWith(t, {
    inbound: {
      public_capabilities: [
        { id: 'echo', max_inflight: 1, per_caller_inflight: 2, per_caler_per_min: 5 },
        { id: 'only.public' },
        { id: 'web' },
      ],
    },
    modules: {
      service: {
        capabilities: [
          { id: 'echo', url: `unix://${service.socketPath}`, price: 1.5 },
          { id: 'web', url: 'http://127.0.0.1:1/x' },
        ],
      },
    },
  });
  return { data, openDir };
}

test('SPEC §2, §2.2, §3.2 (doctor): schema, cross-field and environment problems of one file in one run', async (t) => {
  const { data, openDir } = await nodeWithEveryStage(t);
  const r = await runCli(['doctor', '--data', data]);
  t.is(r.code, 1);
  t.deepEqual(r.stdout.split('\n'), [
    'error: config.json inbound.public_capabilities[0].per_caler_per_min: unknown key (did you mean "per_caller_per_min"?)',
    'error: config.json inbound.public_capabilities[0].per_caller_inflight: 2 exceeds max_inflight 1',
    'warning: config.json inbound.public_capabilities[1].id: "only.public" is not offered: no modules.service.capabilities entry serves it',
    'error: config.json modules.service.capabilities[0].price: must be an integer number of credits, written without a decimal point or exponent',
    // The entry with the bad price is still checked for what does not depend on it: its socket.
    `error: config.json modules.service.capabilities[0].url: ${openDir} is writable by other users, so the socket could be replaced; use a private directory`,
    'error: config.json modules.service.capabilities[1].url: http(s) URLs need modules.service.allow_tcp: true; prefer a unix socket',
    '5 error(s), 1 warning(s)',
  ]);
  const report = JSON.parse((await runCli(['doctor', '--data', data, '--json'])).stdout);
  t.deepEqual(
    report.problems.map((p: any) => `${p.severity} ${p.path}`),
    [
      'error inbound.public_capabilities[0].per_caler_per_min',
      'error inbound.public_capabilities[0].per_caller_inflight',
      'warning inbound.public_capabilities[1].id',
      'error modules.service.capabilities[0].price',
      'error modules.service.capabilities[0].url',
      'error modules.service.capabilities[1].url',
    ],
  );
  t.like(report, { errors: 5, warnings: 1, configFromFile: true });
});

test('SPEC §2: the daemon refuses such a file, naming the count and `anet doctor` on its first line', async (t) => {
  const { data } = await nodeWithEveryStage(t);
  const r = await runCli(['daemon', '--data', data]);
  t.is(r.code, 1);
  const [first, ...rest] = r.stderr.split('\n');
  // The daemon does not look at sockets at start (a call does): the socket is doctor's fifth error only.
  t.is(first, 'anet: config.json has 4 error(s); run `anet doctor`:');
  t.deepEqual(
    rest.map((line) => line.split(':').slice(0, 2).join(':')),
    [
      'error: config.json inbound.public_capabilities[0].per_caler_per_min',
      'error: config.json inbound.public_capabilities[0].per_caller_inflight',
      'error: config.json modules.service.capabilities[0].price',
      'error: config.json modules.service.capabilities[1].url',
    ],
  );
});

test('SPEC §2: doctor without config.json uses the defaults; a broken identity is an error (real binary)', async (t) => {
  const data = await tempDir(t);
  const bare = await runBin(['doctor', '--data', data]);
  t.is(bare.code, 0);
  t.regex(bare.stdout, /note: no config.json/);
  await createIdentity(data, 1);
  await writeFile(join(data, 'keys', 'identity.cbor'), 'garbage');
  const broken = await runBin(['doctor', '--data', data]);
  t.is(broken.code, 1);
  t.regex(broken.stdout, /^error: keys\/identity.cbor: /m);
});

(isRoot ? test : test.skip)('SPEC §3.2: a socket in a directory owned by another user is an error', async (t) => {
  const dir = join(await tempDir(t), 'theirs');
  await mkdir(dir, { mode: 0o755 });
  const service = await startSampleService(join(dir, 'svc.sock'), echoHandler);
  t.teardown(() => service.close());
  await chown(dir, NOBODY, NOBODY);
  const data = await nodeWith(t, offering('echo', `unix://${service.socketPath}`));
  const r = await runCli(['doctor', '--data', data]);
  t.is(r.code, 1);
  t.regex(r.stdout, new RegExp(`theirs is owned by uid ${NOBODY}, who could replace the socket`));
});

test('SPEC §3.2: a private socket directory under a directory others can write to is an error; symlinked paths are resolved', async (t) => {
  const { symlink } = await import('node:fs/promises');
  const open = join(await tempDir(t), 'shared');
  await mkdir(open);
  await chmod(open, 0o777);
  const inner = join(open, 'mine');
  await mkdir(inner, { mode: 0o700 });
  const service = await startSampleService(join(inner, 'svc.sock'), echoHandler);
  t.teardown(() => service.close());
  const data = await nodeWith(t, offering('echo', `unix://${service.socketPath}`));
  const r = await runCli(['doctor', '--data', data]);
  t.is(r.code, 1);
  t.regex(r.stdout, /shared is writable by other users/);
  // A safe directory reached through a symlink is judged by where it leads, not by the link's mode.
  const safe = await privateSocket(t);
  const link = join(await tempDir(t), 'link');
  await symlink(join(safe, '..'), link);
  const viaLink = await nodeWith(t, offering('echo', `unix://${link}/svc.sock`));
  t.is((await runCli(['doctor', '--data', viaLink])).code, 0);
});
