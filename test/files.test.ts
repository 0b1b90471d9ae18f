// Issue 20, SPEC §2.1, §3, §9.3, PROTOCOL §6.8, §8.11: files up to 8 × 64 MiB end to end. The caller's CLI
// checks, seals and uploads each file to the hub as a blob; the sealed task carries its reference; the
// provider reads its type from the first chunk, then streams it into the service's request. A real hub,
// real daemons and a real streaming service; each file's sha-256 as the service decoded it must equal the
// caller's.
import test from 'ava';
import { createHash } from 'node:crypto';
import { mkdir, readdir, stat, truncate, writeFile } from 'node:fs/promises';
import { once } from 'node:events';
import { connect, createServer as createNetServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { startNet, type Net } from './helpers/net.js';
import { runCli } from './helpers/cli.js';
import { png } from './helpers/png.js';
import { filePair, filesContaining } from './helpers/files.js';
import { until } from './helpers/wait.js';
import { tempDir } from './helpers/tmp.js';
import { freePort } from './helpers/postgres.js';
import { childDaemon, startBin } from './helpers/proc.js';
import { startDigestService } from '../src/service/digest.js';
import { startTestHub } from './helpers/hub.js';
import { bytesSource, uploadFiles } from '../src/node/caller/files.js';
import { fileBytes } from '../src/node/provider/files.js';

const MIB = 1024 * 1024;
const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

async function writeFiles(net: Net, files: { name: string; bytes: Buffer }[]): Promise<string[]> {
  const dir = join(net.root, `files-${Math.random().toString(16).slice(2)}`);
  await mkdir(dir);
  return Promise.all(
    files.map(async (f) => {
      const path = join(dir, f.name);
      await writeFile(path, f.bytes);
      return path;
    }),
  );
}

async function call(dir: string, to: string, paths: string[], onErr?: (line: string) => void) {
  const r = await runCli(['call', to, 'file.sum', '--args', '{}', ...paths.flatMap((p) => ['--file', p]), '--json', '--data', dir], onErr);
  return { ...r, record: r.stdout ? JSON.parse(r.stdout) : null };
}

/** The blob files a LevelDB hub keeps under its data dir. */
const blobFiles = async (net: Net) => (await readdir(join(net.root, 'hub', 'blobs')).catch(() => [])).length;

test('issue 20, SPEC §3: one 64 MiB file reaches the service whole; a PNG named .txt is typed image/png by the provider', async (t) => {
  t.timeout(180_000);
  const { net, p, c } = await filePair(t);
  const image = png(64 * MIB);
  const [path] = await writeFiles(net, [{ name: 'holiday.txt', bytes: image }]);
  const progress: string[] = [];
  const r = await call(c.dir, p.aid, [path!], (l) => progress.push(l));
  t.is(r.code, 0, r.stderr);
  t.like(r.record, { state: 'completed' });
  t.deepEqual(r.record.result.files, [{ name: 'holiday.txt', mime: 'image/png', bytes: 64 * MIB, sha256: sha256(image) }]);
  t.deepEqual(p.service.calls, [r.record.result.files]);
  // Not a terminal: one line per tenth of the upload.
  const uploads = progress.filter((l) => l.startsWith('upload: '));
  t.is(uploads.length, 10, progress.join('\n'));
  t.regex(uploads.at(-1)!, /^upload: 100% \(64 MiB of 64 MiB, [\d.]+ MiB\/s\)$/);
  // The provider deleted the blob once the call ended.
  await until(async () => (await blobFiles(net)) === 0, 'the blob is deleted after the call', 500);
});

test('issue 20, SPEC §2.1: 8 files of 64 MiB reach the service, each byte for byte', async (t) => {
  t.timeout(600_000);
  const { net, p, c } = await filePair(t);
  const images = Array.from({ length: 8 }, (_, i) => png(64 * MIB - i));
  const paths = await writeFiles(
    net,
    images.map((bytes, i) => ({ name: `scan-${i}.png`, bytes })),
  );
  const digests = images.map((bytes, i) => ({ name: `scan-${i}.png`, mime: 'image/png', bytes: bytes.length, sha256: sha256(bytes) }));
  images.length = 0;
  const r = await call(c.dir, p.aid, paths);
  t.is(r.code, 0, r.stderr);
  t.deepEqual(r.record.result.files, digests);
  await until(async () => (await blobFiles(net)) === 0, 'every blob is deleted after the call', 500);
});

test('issue 20, SPEC §2.1: a file of 64 MiB + 1 byte, or a ninth file, is refused by the caller before any byte is uploaded', async (t) => {
  t.timeout(60_000);
  const { net, p, c } = await filePair(t);
  let puts = 0;
  net.hub.server.prependListener('request', (req) => void (req.url?.startsWith('/blobs/') && puts++));
  const [big] = await writeFiles(net, [{ name: 'big.png', bytes: png(64 * MIB + 1) }]);
  const r = await call(c.dir, p.aid, [big!]);
  t.is(r.code, 2);
  t.is(
    r.stderr,
    'anet: file 1 (big.png) is 67108865 bytes (64 MiB); a file may be at most 67108864 bytes (64 MiB, SPEC §2.1): nothing was uploaded',
  );
  const small = await writeFiles(
    net,
    Array.from({ length: 9 }, (_, i) => ({ name: `s${i}.png`, bytes: png(1000) })),
  );
  const nine = await call(c.dir, p.aid, small);
  t.is(nine.code, 2);
  t.is(nine.stderr, 'anet: 9 files: a call carries at most 8 (SPEC §2.1); send fewer');
  t.is(puts, 0, 'no request reached the blob routes');
  t.deepEqual(JSON.parse((await runCli(['tasks', '--json', '--data', c.dir])).stdout), [], 'no task was made');
  t.deepEqual(p.service.calls, []);
});

test('issue 20, SPEC §4.1: the provider refuses a file over its own max_bytes or of a type it does not take, and deletes the blob', async (t) => {
  t.timeout(60_000);
  const { net, p, c } = await filePair(t, {}, { max_bytes: MIB });
  const [big, text] = await writeFiles(net, [
    { name: 'big.png', bytes: png(MIB + 1) },
    { name: 'notes.png', bytes: Buffer.from('plain words, not an image\n'.repeat(100)) },
  ]);
  const tooBig = await call(c.dir, p.aid, [big!]);
  t.like(tooBig.record, { state: 'rejected', reason: 'files_not_accepted', detail: 'file 1 (big.png): 1048577 bytes; at most 1048576' });
  const notPng = await call(c.dir, p.aid, [text!]);
  t.like(notPng.record, {
    state: 'rejected',
    reason: 'files_not_accepted',
    detail: 'file 1 (notes.png): detected application/octet-stream, not one of image/png',
  });
  t.deepEqual(p.service.calls, [], 'the service was never called');
  await until(async () => (await blobFiles(net)) === 0, "the refused calls' blobs are deleted", 500);
});

test('issue 20, SPEC §4.1: a call refused while its file is still going up stops the upload, and the blob is deleted', async (t) => {
  t.timeout(120_000);
  const { net, p, c } = await filePair(t, {}, { max_bytes: MIB });
  const [big] = await writeFiles(net, [{ name: 'big.png', bytes: png(64 * MIB) }]);
  const progress: string[] = [];
  const r = await call(c.dir, p.aid, [big!], (l) => progress.push(l));
  t.like(r.record, { state: 'rejected', reason: 'files_not_accepted' });
  // The task went out with the file's head on the hub; the refusal came back long before the rest was up.
  t.false(
    progress.some((l) => l.startsWith('upload: 100%')),
    progress.join('\n'),
  );
  t.deepEqual(p.service.calls, []);
  await until(async () => (await blobFiles(net)) === 0, "the refused call's blob is deleted", 500);
});

test('issue 20, PROTOCOL §8.11: an upload that fails once the task is out cancels the task, deletes the blob and says why', async (t) => {
  t.timeout(120_000);
  const { net, p, c } = await filePair(t);
  const [path] = await writeFiles(net, [{ name: 'shrinking.png', bytes: png(64 * MIB) }]);
  // At the first tenth (the task is out: it goes once the head is up) the file is cut to half its size.
  let cut: Promise<void> | null = null;
  const r = await call(c.dir, p.aid, [path!], (line) => {
    if (!cut && line.startsWith('upload: 10%')) cut = truncate(path!, 32 * MIB);
  });
  t.truthy(cut, 'the file was cut during the upload');
  t.is(r.code, 1);
  t.regex(r.stderr, /the upload of the call's files failed: the file is shorter than 67108864 bytes: it changed while it was read/);
  const [task] = JSON.parse((await runCli(['tasks', '--json', '--data', c.dir])).stdout);
  await until(
    async () => ['canceled', 'failed'].includes(JSON.parse((await runCli(['task', task.task, '--json', '--data', c.dir])).stdout).state),
    'the task ends (canceled, or failed as its file is gone)',
    500,
  );
  t.deepEqual(p.service.calls, [], 'the service never answered a call');
  await until(async () => (await blobFiles(net)) === 0, "the failed upload's blob is deleted", 500);
});

test('issue 20, SPEC §9.3: a discard capability leaves no byte of a file, plain or sealed, on either node or the hub', async (t) => {
  t.timeout(120_000);
  const { net, p, c } = await filePair(t, { discard: true });
  const MARKER = 'FILE-MARKER-7f3a9c';
  const image = png(3 * MIB, (n) => Buffer.from(MARKER.repeat(Math.ceil(n / MARKER.length)).slice(0, n)));
  const [path] = await writeFiles(net, [{ name: 'secret.png', bytes: image }]);
  const r = await call(c.dir, p.aid, [path!]);
  t.is(r.code, 0, r.stderr);
  t.is(r.record.result.files[0].sha256, sha256(image));
  await until(async () => (await blobFiles(net)) === 0, 'the blob is deleted after the call', 500);
  for (const dir of [p.dir, c.dir, join(net.root, 'hub')]) t.deepEqual(await filesContaining(dir, MARKER), [], dir);
});

/** A service that reads the first MiB of a call's body, then stops reading (the provider's download stalls on it). */
async function stallingService(socketPath: string) {
  const { createServer } = await import('node:http');
  let read = 0;
  const server = createServer((req) => {
    req.on('data', (c: Buffer) => {
      read += c.length;
      if (read > MIB) req.pause();
    });
  });
  await new Promise<void>((r) => server.listen(socketPath, () => r()));
  // Its paused connections never see their end: closed by force.
  const close = () =>
    new Promise<void>((r) => {
      server.close(() => r());
      server.closeAllConnections();
    });
  return { read: () => read, close };
}

test('issue 20, SPEC §9.5: a provider killed while it reads a file ends the call interrupted after its restart, and the blob is deleted', async (t) => {
  t.timeout(180_000);
  const net = await startNet(t);
  const run = join(net.root, 'run');
  await mkdir(run, { mode: 0o700 });
  const service = await stallingService(join(run, 'stall.sock'));
  t.teardown(() => service.close());
  const p = await net.node('p', {
    inbound: { policy: 'open', public_capabilities: [{ id: 'file.sum', files: { media_types: ['image/png'], max_bytes: 64 * MIB } }] },
    modules: { service: { capabilities: [{ id: 'file.sum', url: `unix://${join(run, 'stall.sock')}` }] } },
  });
  const c = await net.node('c');
  let provider = await childDaemon(t, p.dir);
  await net.start(c.dir);
  const [path] = await writeFiles(net, [{ name: 'big.png', bytes: png(32 * MIB) }]);
  const calling = call(c.dir, p.aid, [path!]);
  await until(() => service.read() > MIB, 'the service reading the first MiB', 3000);
  t.is(await blobFiles(net), 1, 'the blob waits on the hub while the provider reads it');
  provider.child.kill('SIGKILL');
  await provider.exited;
  provider = await childDaemon(t, p.dir);
  const r = await calling;
  // Its stderr in the message: this failed once in CI (no record printed) and never here, even under load.
  t.like(r.record, { state: 'failed', reason: 'interrupted' }, `anet call exited ${r.code}; stderr ends: ${r.stderr.slice(-600)}`);
  await until(async () => (await blobFiles(net)) === 0, "the interrupted call's blob is deleted", 500);
});

test('issue 20, PROTOCOL §8.11: a hub killed mid-upload and started again keeps the whole pieces; the upload goes on and the call completes', async (t) => {
  t.timeout(180_000);
  const root = await tempDir(t);
  const port = await freePort();
  const hubDir = join(root, 'hub');
  const startHub = async () => {
    const hub = startBin(t, ['hub', 'start', '--port', String(port), '--data', hubDir]);
    await hub.waitFor(/ready on/);
    return hub;
  };
  let hub = await startHub();
  const url = `http://127.0.0.1:${port}`;
  const run = join(root, 'run');
  await mkdir(run, { mode: 0o700 });
  const service = await startDigestService(join(run, 'sum.sock'));
  t.teardown(() => service.close());
  const node = async (name: string, config: Record<string, unknown>) => {
    const dir = join(root, name);
    const init = await runCli(['init', '--data', dir, '--json']);
    await writeFile(join(dir, 'config.json'), JSON.stringify({ hub: url, ...config }));
    return { dir, aid: JSON.parse(init.stdout).aid as string };
  };
  const p = await node('p', {
    inbound: { policy: 'open', public_capabilities: [{ id: 'file.sum', files: { media_types: ['image/png'], max_bytes: 64 * MIB } }] },
    modules: { service: { capabilities: [{ id: 'file.sum', url: `unix://${service.socketPath}` }] } },
  });
  const c = await node('c', {});
  await childDaemon(t, p.dir);
  await childDaemon(t, c.dir);
  const image = png(64 * MIB);
  const path = join(root, 'big.png');
  await writeFile(path, image);
  // At 30% of the upload the hub is killed, its whole pieces counted, and it is started again on the same
  // port and data dir while the CLI retries.
  let kept = -1;
  let restarted: Promise<void> | null = null;
  const r = await call(c.dir, p.aid, [path], (line) => {
    if (restarted || !line.startsWith('upload: 30%')) return;
    restarted = (async () => {
      const exited = once(hub.child, 'exit');
      hub.child.kill('SIGKILL');
      await exited;
      const [blob] = await readdir(join(hubDir, 'blobs'));
      kept = (await stat(join(hubDir, 'blobs', blob!))).size;
      hub = await startHub();
    })();
  });
  t.truthy(restarted, 'the hub was killed during the upload');
  await restarted;
  t.true(kept >= MIB && kept % MIB === 0, `the killed hub kept whole pieces (${kept} bytes)`);
  t.is(r.code, 0, r.stderr);
  t.deepEqual(r.record.result.files, [{ name: 'big.png', mime: 'image/png', bytes: 64 * MIB, sha256: sha256(image) }]);
});

test("issue 20, PROTOCOL §8.11: an upload dropped mid-way goes on from the hub's last whole piece, not from the start", async (t) => {
  t.timeout(60_000);
  const root = await tempDir(t);
  const hub = await startTestHub({ dataDir: join(root, 'hub'), port: 0 });
  t.teardown(() => hub.close());
  const bytes = png(10 * MIB);
  const whole = bytesSource(bytes);
  const starts: number[] = [];
  const source = {
    size: bytes.length,
    read: (start: number) => {
      starts.push(start);
      return whole.read(start);
    },
  };
  // Between the client and the hub: the first upload's connection is cut after 5 MiB, as a dropped link would.
  let cut = false;
  const proxy = createNetServer((client) => {
    const upstream = connect(Number(new URL(hub.url).port), '127.0.0.1');
    // Only an upload's body takes a connection past 5 MiB (requests reuse connections: a status, the
    // head's PUT, then the rest's).
    let forwarded = 0;
    client.on('data', (d: Buffer) => {
      forwarded += d.length;
      if (!cut && forwarded > 5 * MIB) {
        cut = true;
        client.destroy();
        upstream.destroy();
        return;
      }
      upstream.write(d);
    });
    upstream.pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => void proxy.close());
  const via = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  const [ref] = await uploadFiles(via, [{ name: 'x.png', source }]);
  t.true(cut, 'the connection was cut');
  // The first pass reads it all to learn the address; then the head (the first chunk's 2 MiB), the rest,
  // broken off, and the rest of that from what the hub kept. A resume may meet the hub still closing the
  // cut request (409: one upload of a blob at a time) and ask again, from the same whole piece: every
  // resume starts past the head and within the 5 MiB sent, never from the start.
  t.deepEqual(starts.slice(0, 3), [0, 0, MIB], String(starts));
  const resumes = starts.slice(3);
  t.true(resumes.length >= 1 && resumes.length <= 3, `resumed ${resumes.length} time(s): ${starts}`);
  for (const from of resumes) t.true(from > MIB && from <= 5 * MIB, `resumed from ${from}, what the hub had of the 5 MiB sent`);
  const plain: Buffer[] = [];
  for await (const p of fileBytes(hub.url, ref!)) plain.push(Buffer.from(p));
  t.is(sha256(Buffer.concat(plain)), sha256(bytes));
});
