// Hostile probes of one node (issue 18: items 6, 7, 9): damaged key and store files, oversized MCP input,
// a service's absurd Retry-After, unpadded base64 and hostile file names. Each reproduces what a probe
// found, against real files, sockets and processes in temp dirs, bounded in time (no fixed sleeps).
import test, { type ExecutionContext } from 'ava';
import { chmod, mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { BIN, runBin, runCli } from '../helpers/cli.js';
import { tempDir } from '../helpers/tmp.js';
import { startNet, rawPeer, type Net } from '../helpers/net.js';
import { fromBody, toBody } from '../../src/protocol/body.js';
import { TASK_SEND, TASK_RESULT } from '../../src/protocol/messages.js';
import { startSampleService, echoHandler, type SampleHandler } from '../../src/service/sample.js';
import { Store } from '../../store/db.js';
import { startDaemon } from '../../src/daemon/daemon.js';
import { decodeCanonical, encodeCanonical, type CborValue } from '../../src/identity/cbor.js';

/** A data dir with an identity and a store that has been opened (and closed) once. */
async function nodeDir(t: Parameters<typeof tempDir>[0]): Promise<string> {
  const dir = join(await tempDir(t), 'node');
  const init = await runCli(['init', '--data', dir, '--json']);
  if (init.code !== 0) throw new Error(init.stderr);
  await writeFile(join(dir, 'config.json'), JSON.stringify({ hub: 'http://127.0.0.1:1' }));
  const store = await Store.open(dir);
  await store.close();
  return dir;
}

test('SPEC §14 (hostile): a damaged LevelDB CURRENT or MANIFEST in <data>/store is one line naming the file and what to do', async (t) => {
  const dir = await nodeDir(t);
  const storeDir = join(dir, 'store');
  const manifest = (await readdir(storeDir)).find((f) => f.startsWith('MANIFEST-'))!;
  const current = await readFile(join(storeDir, 'CURRENT'));

  await writeFile(join(storeDir, 'CURRENT'), 'garbage\n');
  const badCurrent = await runCli(['tasks', '--data', dir]);
  t.is(badCurrent.code, 1);
  t.false(badCurrent.stderr.includes('\n'), badCurrent.stderr);
  t.true(badCurrent.stderr.includes(join(storeDir, 'CURRENT')), badCurrent.stderr);
  t.regex(badCurrent.stderr, /restore/);

  await writeFile(join(storeDir, 'CURRENT'), current);
  const bytes = await readFile(join(storeDir, manifest));
  bytes[10]! ^= 0xff;
  await writeFile(join(storeDir, manifest), bytes);
  const badManifest = await runCli(['tasks', '--data', dir]);
  t.is(badManifest.code, 1);
  t.false(badManifest.stderr.includes('\n'), badManifest.stderr);
  t.true(badManifest.stderr.includes(join(storeDir, manifest)), badManifest.stderr);
  t.regex(badManifest.stderr, /restore/);
});

test('SPEC §8 (hostile): a damaged keys/enc.cbor is named by doctor and refused at start (one line), not a deaf node', async (t) => {
  const net = await startNet(t);
  const p = await net.node('p');
  const encPath = join(p.dir, 'keys', 'enc.cbor');
  await (await net.start(p.dir)).close();
  const good = await readFile(encPath);

  // One flipped bit in a private key: the file still decodes, but every message sealed to the published
  // public key would fail to open; the probe saw "relay stream open" and nothing else.
  const keys = decodeCanonical(good) as Map<number, CborValue>[];
  (keys[0]!.get(2) as Uint8Array)[7]! ^= 0x01;
  const damaged = [encodeCanonical(keys), Buffer.from('garbage'), good.subarray(0, good.length - 9)];
  for (const bytes of damaged) {
    await writeFile(encPath, bytes, { mode: 0o600 });
    const doctor = await runCli(['doctor', '--data', p.dir]);
    t.is(doctor.code, 1, doctor.stdout);
    const line = doctor.stdout.split('\n').find((l) => l.includes(encPath));
    t.truthy(line, doctor.stdout);
    t.regex(line!, /^error: .*enc\.cbor is damaged \(.+\): move it aside and restart/);

    const log: string[] = [];
    const refused = await t.throwsAsync(startDaemon(p.dir, (l) => log.push(l), { clock: net.clock }));
    t.true(refused!.message.startsWith(`${encPath} is damaged (`), refused!.message);
    t.false(refused!.message.includes('\n'));
    t.false(
      log.some((l) => l.startsWith('relay stream open')),
      log.join('\n'),
    );
  }

  // Moved aside, as the line says: the next start makes new keys and is heard again.
  await writeFile(encPath, damaged[0]!);
  const { rename } = await import('node:fs/promises');
  await rename(encPath, `${encPath}.damaged`);
  await net.start(p.dir);
  t.is((await runCli(['doctor', '--data', p.dir])).code, 0);
});

test('SPEC §12 (hostile): a damaged keys/identity.cbor is one line naming the file and what to do (CLI and doctor)', async (t) => {
  const dir = await nodeDir(t);
  const path = join(dir, 'keys', 'identity.cbor');
  const good = await readFile(path);
  const flipped = Buffer.from(good);
  flipped[good.length - 5]! ^= 0x01;
  for (const bytes of [Buffer.from('garbage'), good.subarray(0, 50), flipped, Buffer.alloc(0)]) {
    await writeFile(path, bytes);
    const id = await runCli(['id', '--data', dir]);
    t.is(id.code, 1);
    t.false(id.stderr.includes('\n'), id.stderr);
    t.true(id.stderr.startsWith(`anet: ${path} is damaged (`), id.stderr);
    t.regex(id.stderr, /restore it from a backup/);
    const doctor = await runCli(['doctor', '--data', dir]);
    t.is(doctor.code, 1);
    t.regex(doctor.stdout, new RegExp(`^error: .*${path.replace(/[.]/g, '\\.')} is damaged \\(.*restore it from a backup`, 'm'));
  }
});

test('SPEC §12 (hostile): keys/identity.cbor readable by others (0644) is a doctor problem with the chmod fix and a daemon warning', async (t) => {
  const net = await startNet(t);
  const p = await net.node('p');
  const path = join(p.dir, 'keys', 'identity.cbor');
  t.is((await runBin(['doctor', '--data', p.dir])).code, 0);
  await chmod(path, 0o644);
  const doctor = await runBin(['doctor', '--data', p.dir]);
  t.is(doctor.code, 1, doctor.stdout);
  t.regex(
    doctor.stdout,
    new RegExp(
      `^error: .*${path.replace(/[.]/g, '\\.')} is readable by other users \\(mode 0644\\).*chmod 600 ${path.replace(/[.]/g, '\\.')}`,
      'm',
    ),
  );
  const log: string[] = [];
  // The level travels beside the line (pino writes it as a field; a terminal shows it as a prefix).
  const daemon = await startDaemon(p.dir, (l, level) => log.push(`${level ?? 'info'}: ${l}`), { clock: net.clock });
  t.teardown(() => daemon.close());
  const warnings = log.filter((l) => l.includes(path));
  t.is(warnings.length, 1, log.join('\n'));
  t.regex(warnings[0]!, /^warn: .*mode 0644.*chmod 600/);
});

/** A provider whose capability `id` is served by `handler` on a private Unix socket. */
async function serviceProvider(t: ExecutionContext, net: Net, id: string, handler: SampleHandler, files?: Record<string, unknown>) {
  const run = join(net.root, `run-${id}`);
  await mkdir(run, { mode: 0o700 });
  const service = await startSampleService(join(run, 'svc.sock'), handler);
  t.teardown(() => service.close());
  return net.node(`p-${id}`, {
    inbound: { policy: 'open', public_capabilities: [{ id, ...(files ? { files, max_args_bytes: 4096 } : {}) }] },
    modules: { service: { capabilities: [{ id, url: `unix://${service.socketPath}` }] } },
  });
}

test("SPEC §3.1 (hostile): a service's Retry-After of 99999999999999999999 s or year 9999 reaches the caller clamped to 24 h, an integer", async (t) => {
  const net = await startNet(t);
  const answers = ['99999999999999999999', 'Fri, 31 Dec 9999 23:59:59 GMT', '1.5', '7'];
  let next = 0;
  const busy: SampleHandler = (_body, _req, res) => {
    res.writeHead(503, { 'retry-after': answers[next++]!, 'content-type': 'application/json' });
    res.end('{}');
  };
  const p = await serviceProvider(t, net, 'demo.busy', busy);
  const c = await net.node('c');
  await net.start(p.dir);
  await net.start(c.dir);
  const seen: unknown[] = [];
  for (let i = 0; i < answers.length; i++) {
    const r = await runCli(['call', p.aid, 'demo.busy', '--json', '--data', c.dir]);
    t.false(/e\+|\d\.\d/.test(r.stdout.match(/"retryAfterMs": ([^,\n]+)/)?.[1] ?? ''), r.stdout);
    const record = JSON.parse(r.stdout);
    t.like(record, { state: 'failed', reason: 'service_busy' });
    seen.push(record.retryAfterMs);
  }
  t.deepEqual(seen, [86_400_000, 86_400_000, null, 7000], 'clamped to 24 h; a value that is not delay-seconds or a date is ignored');
});

/** A provider echoing what its service receives ({args, files} with files) and a caller, both running. */
async function filesNet(t: ExecutionContext) {
  const net = await startNet(t);
  const p = await serviceProvider(t, net, 'demo.files', echoHandler, { max_count: 8, max_bytes: 1 << 20, media_types: ['*/*'] });
  const c = await net.node('c');
  await net.start(p.dir);
  const caller = (await net.start(c.dir)).node.caller;
  const call = (files: { name: string; data_b64: string }[]) => caller.call(p.aid, 'demo.files', '{}', files, 20_000);
  return { call };
}

test("SPEC §3, §4.1, PROTOCOL §1.2 (hostile): file data that is not canonical standard padded base64 is refused by the caller's node before anything is uploaded or sent", async (t) => {
  const { call } = await filesNet(t);
  const ok = await call([{ name: 'a.txt', data_b64: Buffer.from('abcd').toString('base64') }]);
  t.like(ok, { state: 'completed' });
  // Files are blobs now (issue 20): the node that takes base64 inline checks it; a provider still refuses
  // it from older nodes (test/unit/admission.test.ts).
  for (const data_b64 of ['YWJjZA', 'YWJjZA=', 'YWJjZA-_', 'YR==', 'YWJ=', 'YWJjZA==YQ==']) {
    await t.throwsAsync(call([{ name: 'a.txt', data_b64 }]), { message: 'file 1 (a.txt): not standard padded base64' }, data_b64);
  }
});

test('SPEC §3 (hostile): file names reach the service as a safe base name (no separators, control characters or leading dots; at most 255 bytes)', async (t) => {
  const { call } = await filesNet(t);
  const data_b64 = Buffer.from('hello').toString('base64');
  const names: [string, string][] = [
    ['../../etc/passwd\u0000.png', 'passwd.png'],
    ['C:\\Users\\me\\photo.jpg', 'photo.jpg'],
    ['.bashrc', 'bashrc'],
    ['..', 'file-4'],
    ['a\u202Egnp.exe\u0007\n', 'agnp.exe'],
    ['', 'file-6'],
    ['ünïcödé 名前.txt', 'ünïcödé 名前.txt'],
  ];
  const long = `${'é'.repeat(200)}.png`;
  const r = await call([...names.map(([name]) => ({ name, data_b64 })), { name: long, data_b64 }]);
  t.like(r, { state: 'completed' }, String(r.detail));
  const got = (r.result as { echo: { files: { name: string }[] } }).echo.files.map((f) => f.name);
  t.deepEqual(
    got.slice(0, names.length),
    names.map(([, safe]) => safe),
  );
  const cut = got[names.length]!;
  t.true(Buffer.byteLength(cut) <= 255, `${Buffer.byteLength(cut)} bytes`);
  t.true(cut.endsWith('é.png') && long.startsWith(cut.slice(0, -4)), cut);
});

test('SPEC §12 (hostile): anet mcp serves a call_capability with one 8 MiB file (an 11 MiB stdin line), refuses a line over its limit with a JSON-RPC error naming it, and reads on', async (t) => {
  t.timeout(120_000);
  const net = await startNet(t);
  const digest: SampleHandler = (body) => {
    const files = (body as { files: { name: string; data_b64: string }[] }).files;
    const bytes = Buffer.from(files[0]!.data_b64, 'base64');
    return { name: files[0]!.name, bytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') };
  };
  // The default files.max_bytes: 8 MiB.
  const p = await serviceProvider(t, net, 'img.digest', digest, { max_count: 1, media_types: ['*/*'] });
  const c = await net.node('c');
  await net.start(p.dir);
  await net.start(c.dir);

  const transport = new StdioClientTransport({ command: process.execPath, args: [BIN, 'mcp', '--data', c.dir], stderr: 'pipe' });
  const stderr: string[] = [];
  transport.stderr!.on('data', (chunk: Buffer) => stderr.push(chunk.toString('utf8')));
  const client = new Client({ name: 'anet-hostile', version: '1.0.0' });
  await client.connect(transport);
  t.teardown(() => client.close());
  const exited = new Promise<number | null>((resolve) =>
    (transport as unknown as { _process: ChildProcess })._process.once('exit', (code) => resolve(code)),
  );
  const callTool = (args: Record<string, unknown>) =>
    client.callTool({ name: 'call_capability', arguments: { aid: p.aid, capability: 'img.digest', ...args } }, undefined, {
      timeout: 55_000,
    }) as Promise<CallToolResult>;

  const file = randomBytes(8 * 1024 * 1024);
  const big = await callTool({ args: { size: 'full' }, files: [{ name: 'big.bin', data_b64: file.toString('base64') }] });
  t.falsy(big.isError, JSON.stringify(big.content).slice(0, 300) + stderr.join(''));
  t.like(big.structuredContent, {
    state: 'completed',
    result: { name: 'big.bin', bytes: file.length, sha256: createHash('sha256').update(file).digest('hex') },
  });

  // 40 MiB of file: no call that large can cross the relay; the answer is an error naming the limit.
  const huge = await t.throwsAsync(
    callTool({ files: [{ name: 'huge.bin', data_b64: Buffer.alloc(30 * 1024 * 1024).toString('base64') }] }),
  );
  t.regex(huge!.message, /MCP error -32600: .*over anet mcp's limit of \d+ bytes \(32 MiB\)/, huge!.message);
  t.regex(stderr.join(''), /anet mcp: refused a request of \d+ bytes/);

  // Still serving, on the same stdin.
  const tasks = (await client.callTool({ name: 'list_tasks', arguments: {} })) as CallToolResult;
  t.falsy(tasks.isError);
  t.is((tasks.structuredContent!.tasks as unknown[]).length, 1);
  t.is((transport as unknown as { _process: ChildProcess })._process.exitCode, null, `anet mcp exited: ${stderr.join('')}`);
  await client.close();
  t.is(await exited, 0, stderr.join(''));
});

test("SPEC §4.1, §9.1 (hostile): a provider's absurd retry_after_ms reaches the caller's record as at most a day, a whole number of ms", async (t) => {
  const net = await startNet(t);
  const c = await net.node('c');
  await net.start(c.dir);
  const peer = await rawPeer(t, net, 'hostile-provider');
  const asks = [1e23, 1.5, -5, Number.NaN];
  peer.messenger.on(TASK_SEND, async (m) => {
    const task = String(fromBody(m.body)!.task);
    await peer.messenger.send(
      m.from,
      TASK_RESULT,
      toBody({ task, state: 'failed', reason: 'service_busy', retry_after_ms: asks.shift()! }),
    );
  });
  const seen = [];
  for (let i = 0; i < 4; i++) {
    const r = await runCli(['call', peer.aid, 'demo.echo', '--args', '{}', '--json', '--data', c.dir]);
    seen.push(JSON.parse(r.stdout).retryAfterMs);
  }
  t.deepEqual(seen, [86_400_000, 2, null, null]);
});
