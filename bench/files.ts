// bench/files (issue 20): files as encrypted blobs, end to end, with every part in its own process, as an
// operator runs them: `anet hub start`, the provider's and the caller's `anet daemon`, the streaming digest
// service (bench/files/service.ts: src/service/digest.ts) and, for each call, `anet call … --file … --json`
// (the CLI seals and uploads each file to the hub; the provider's daemon downloads it, opens it chunk by
// chunk and streams it as base64 into the service's request). Every answer is checked: each file's sha-256
// as the service computed it must equal the file's, so a broken transfer cannot pass.
//
// 1. One 64 MiB PNG: MiB/s over the `anet call` command's wall time (a new process: node's start counts),
//    against a plain loopback copy of the same bytes measured in the same run, alternated with it: an HTTP
//    PUT of the file streamed from disk to a node:http server in its own process that reads and discards it
//    (bench/files/sink.ts). Split by the CLI's progress lines: until `upload: 100%` (start, the address
//    pass over the file, the upload), then the rest (the provider's read, the service, the answer).
//    Then the least the design can take (designFloor): each step a file needs, timed alone here, summed
//    over the cores: the best rate, and ratio, any implementation of these steps could reach on this machine.
// 2. 8 x 64 MiB in one call: wall time and the peak RSS of each process (VmHWM from /proc/<pid>/status,
//    polled every 100 ms while the call runs; reset before it through /proc/<pid>/clear_refs).
// Targets (issue 20): one file >= 0.25x the plain copy's MiB/s; no process above 200 MB (10^6 bytes) RSS.
// `--quick`: one round. ANET_BENCH_PROF=DIR: each process writes a CPU profile there (node --cpu-prof).
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, createReadStream, fsyncSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { png } from '../test/helpers/png.js';
import { DEFAULT_CHUNK, newBlobKey, openChunks, sealChunks } from '../src/protocol/blob-seal.js';
import { bytesSource } from '../src/node/caller/files.js';
import { freePort, median } from './hub/common.js';
import { cpuMsAt, cpuTimesAt } from './proc-cpu.js';

const MIB = 1024 * 1024;
const FILE = 64 * MIB;
const EIGHT = 8;
const RATIO_TARGET = 0.25;
const RSS_TARGET = 200e6;
const POLL_MS = 100;
/** A call that has not ended by then is killed (the CLI itself gives up waiting after 150 s). */
const CALL_TIMEOUT_MS = 240_000;

const BIN = fileURLToPath(new URL('../src/cli/bin.js', import.meta.url));
const SERVICE = fileURLToPath(new URL('./files/service.js', import.meta.url));
const SINK = fileURLToPath(new URL('./files/sink.js', import.meta.url));

const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const mb = (bytes: number) => `${(bytes / 1e6).toFixed(0)} MB`;
const secs = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
const rate = (bytes: number, ms: number) => bytes / MIB / (ms / 1000);

// ---- Child processes: each one tracked, all stopped at the end, on a signal or when this process exits ----

interface Line {
  at: number;
  line: string;
}

interface Proc {
  name: string;
  child: ChildProcess;
  pid: number;
  /** stdout and stderr lines, with when they came (performance.now()). */
  lines: Line[];
  /** The whole stdout (the CLI's JSON record). */
  stdout(): string;
  exited: Promise<number | null>;
  waitFor(re: RegExp, ms?: number): Promise<string>;
  stop(): Promise<void>;
}

const procs = new Set<Proc>();

function start(name: string, args: string[]): Proc {
  const prof = process.env.ANET_BENCH_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.ANET_BENCH_PROF] : [];
  const child = spawn(process.execPath, [...prof, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: Line[] = [];
  let out = '';
  const waiters: { re: RegExp; resolve: (l: string) => void }[] = [];
  const onLine = (line: string) => {
    lines.push({ at: performance.now(), line });
    for (const w of [...waiters])
      if (w.re.test(line)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(line);
      }
  };
  child.stdout!.on('data', (c: Buffer) => {
    out += c.toString();
  });
  createInterface({ input: child.stdout! }).on('line', onLine);
  createInterface({ input: child.stderr! }).on('line', onLine);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code, signal) => resolve(signal ? -1 : code)));
  const proc: Proc = {
    name,
    child,
    pid: child.pid ?? 0,
    lines,
    stdout: () => out,
    exited,
    waitFor: (re, ms = 30_000) =>
      new Promise((resolve, reject) => {
        const seen = lines.find((l) => re.test(l.line));
        if (seen) return resolve(seen.line);
        const timer = setTimeout(() => reject(new Error(`${name}: no line ${re} in ${ms / 1000} s; output:\n${tail(proc)}`)), ms);
        void exited.then(() => {
          clearTimeout(timer);
          reject(new Error(`${name} exited before ${re}; output:\n${tail(proc)}`));
        });
        waiters.push({
          re,
          resolve: (l) => {
            clearTimeout(timer);
            resolve(l);
          },
        });
      }),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
      procs.delete(proc);
    },
  };
  procs.add(proc);
  void exited.then(() => procs.delete(proc));
  return proc;
}

const tail = (p: Proc) =>
  p.lines
    .slice(-30)
    .map((l) => l.line)
    .join('\n');

const stopAll = () => Promise.allSettled([...procs].map((p) => p.stop()));
/** This process ending any way: no child outlives it. */
const killAll = () => {
  for (const p of procs) p.child.kill('SIGKILL');
};

function cli(args: string[]): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile(process.execPath, [BIN, ...args], (err, stdout, stderr) =>
      err ? reject(new Error(`anet ${args[0]}: ${stderr}`)) : resolve(stdout),
    ),
  );
}

// ---- /proc: peak RSS (VmHWM) and CPU time of a process ----

function statusKb(pid: number, field: string): number | null {
  try {
    const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/** User + system CPU time so far (ms), or null once the process is gone. */
const cpuMs = (pid: number): number | null => cpuMsAt(`/proc/${pid}`);
/** System CPU time so far (ms): the kernel's part of cpuMs. */
const sysMs = (pid: number): number => cpuTimesAt(`/proc/${pid}`)?.system ?? 0;
/** Minor page faults so far. */
const faultsOf = (pid: number): number => cpuTimesAt(`/proc/${pid}`)?.faults ?? 0;

/** Resets a process's VmHWM to its current RSS (writing 5 to clear_refs); false where the kernel refuses. */
function resetPeak(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

// ---- The measured operations ----

/** The plain copy: an HTTP PUT of the file streamed from disk to the sink; its wall time (ms). */
function plainPut(port: number, path: string, size: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = request(
      {
        host: '127.0.0.1',
        port,
        method: 'PUT',
        path: '/',
        agent: false,
        headers: { 'content-type': 'application/octet-stream', 'content-length': String(size) },
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          body += c;
        });
        res.on('end', () => {
          const ms = performance.now() - t0;
          if (res.statusCode !== 200 || Number(body) !== size)
            reject(new Error(`the sink answered ${res.statusCode} ${body}, not ${size}`));
          else resolve(ms);
        });
      },
    );
    req.on('error', reject);
    createReadStream(path).on('error', reject).pipe(req);
  });
}

interface Sent {
  path: string;
  name: string;
  size: number;
  sha256: string;
}

interface Parts {
  hub: Proc;
  service: Proc;
  provider: Proc;
  caller: Proc;
  callerDir: string;
  providerAid: string;
}

interface CallFigures {
  wall: number;
  /** From the start of the command to its `upload: 100%` line (ms), and the rate that line gives. */
  upload: number | null;
  uploadRate: string | null;
  /** Peak RSS (bytes) of each process during the call, by name. */
  peaks: Record<string, number>;
  /** RSS (bytes) of each long-lived process as the call began. */
  before: Record<string, number>;
  /** CPU time (ms) of each process during the call, by name. */
  cpu: Record<string, number>;
  /** The system part of `cpu` (ms). */
  sys: Record<string, number>;
  /** Minor page faults of each process during the call. */
  faults: Record<string, number>;
}

const NAMES = ['hub', 'caller CLI', 'caller daemon', 'provider daemon', 'service'] as const;

/**
 * `anet call <provider> file.sum --file …` in a new process, its peak RSS and every long-lived part's reset
 * first and all polled every 100 ms until it exits. Throws unless it completed with each file's sha-256,
 * in the record the CLI printed and in the line the service printed, equal to the file's.
 */
async function callFiles(parts: Parts, files: Sent[]): Promise<CallFigures> {
  const long = { hub: parts.hub, 'caller daemon': parts.caller, 'provider daemon': parts.provider, service: parts.service };
  for (const p of Object.values(long)) resetPeak(p.pid);
  const before = Object.fromEntries(Object.entries(long).map(([n, p]) => [n, (statusKb(p.pid, 'VmRSS') ?? 0) * 1024]));
  const cpu0 = Object.fromEntries(Object.entries(long).map(([n, p]) => [n, cpuMs(p.pid) ?? 0]));
  const sys0 = Object.fromEntries(Object.entries(long).map(([n, p]) => [n, sysMs(p.pid)]));
  const faults0 = Object.fromEntries(Object.entries(long).map(([n, p]) => [n, faultsOf(p.pid)]));
  const serviceLines = parts.service.lines.length;
  const t0 = performance.now();
  const call = start('caller CLI', [
    BIN,
    'call',
    parts.providerAid,
    'file.sum',
    '--args',
    '{}',
    ...files.flatMap((f) => ['--file', f.path]),
    '--json',
    '--data',
    parts.callerDir,
  ]);
  const peaks: Record<string, number> = {};
  let cliCpu = 0;
  let cliSys = 0;
  let cliFaults = 0;
  const poll = () => {
    for (const [n, p] of [...Object.entries(long), ['caller CLI', call] as const]) {
      const kb = statusKb(p.pid, 'VmHWM');
      if (kb !== null) peaks[n] = Math.max(peaks[n] ?? 0, kb * 1024);
    }
    cliCpu = cpuMs(call.pid) ?? cliCpu;
    const cli = cpuTimesAt(`/proc/${call.pid}`);
    cliSys = cli?.system ?? cliSys;
    cliFaults = cli?.faults ?? cliFaults;
  };
  poll();
  const timer = setInterval(poll, POLL_MS);
  const killer = setTimeout(() => call.child.kill('SIGKILL'), CALL_TIMEOUT_MS);
  const code = await call.exited;
  const wall = performance.now() - t0;
  clearInterval(timer);
  clearTimeout(killer);
  poll(); // the long-lived processes once more (the CLI is gone)
  const cpu: Record<string, number> = { 'caller CLI': cliCpu };
  const sys: Record<string, number> = { 'caller CLI': cliSys };
  const faults: Record<string, number> = { 'caller CLI': cliFaults };
  for (const [n, p] of Object.entries(long)) {
    cpu[n] = (cpuMs(p.pid) ?? 0) - cpu0[n]!;
    sys[n] = sysMs(p.pid) - sys0[n]!;
    faults[n] = faultsOf(p.pid) - faults0[n]!;
  }

  const fail = (why: string) =>
    new Error(`${why}\nanet call exited ${code}; its output:\n${tail(call)}\nprovider daemon:\n${tail(parts.provider)}`);
  let record: { state?: string; result?: { files?: { name: string; bytes: number; sha256: string }[] } };
  try {
    record = JSON.parse(call.stdout());
  } catch {
    throw fail('the call printed no JSON record');
  }
  if (code !== 0 || record.state !== 'completed') throw fail(`the call ended ${record.state}`);
  const expect = files.map((f) => ({ name: f.name, bytes: f.size, sha256: f.sha256 }));
  const got = (record.result?.files ?? []).map((f) => ({ name: f.name, bytes: f.bytes, sha256: f.sha256 }));
  if (JSON.stringify(got) !== JSON.stringify(expect))
    throw fail(`the service's answer does not match the files sent:\n${JSON.stringify(got)}\n${JSON.stringify(expect)}`);
  // The service prints its answer once it is sent: before the provider's daemon could pass it on.
  const said = parts.service.lines.slice(serviceLines).find((l) => l.line.startsWith('call '));
  const saidFiles = said ? (JSON.parse(said.line.slice(5)) as { name: string; bytes: number; sha256: string }[]) : [];
  const fromService = saidFiles.map((f) => ({ name: f.name, bytes: f.bytes, sha256: f.sha256 }));
  if (JSON.stringify(fromService) !== JSON.stringify(expect)) throw fail(`the service computed ${said?.line ?? 'nothing'}`);

  const uploaded = call.lines.find((l) => l.line.startsWith('upload: 100%'));
  return {
    wall,
    upload: uploaded ? uploaded.at - t0 : null,
    uploadRate: uploaded?.line.match(/([\d.]+ [KMG]iB\/s)/)?.[1] ?? null,
    peaks,
    before,
    cpu,
    sys,
    faults,
  };
}

// ---- The bench ----

async function writePng(path: string, size: number): Promise<Sent> {
  const bytes = png(size);
  await writeFile(path, bytes);
  return { path, name: path.slice(path.lastIndexOf('/') + 1), size, sha256: sha256(bytes) };
}

async function node(root: string, name: string, hub: string, config: Record<string, unknown>): Promise<{ dir: string; aid: string }> {
  const dir = join(root, name);
  const aid = JSON.parse(await cli(['init', '--data', dir, '--json'])).aid as string;
  await writeFile(join(dir, 'config.json'), JSON.stringify({ hub, ...config }));
  return { dir, aid };
}

async function startParts(root: string): Promise<Parts> {
  const port = await freePort();
  const hub = start('hub', [BIN, 'hub', 'start', '--port', String(port), '--data', join(root, 'hub')]);
  await hub.waitFor(/ready on/);
  const url = `http://127.0.0.1:${port}`;
  const run = join(root, 'run');
  await mkdir(run, { mode: 0o700 });
  const socket = join(run, 'sum.sock');
  const service = start('service', [SERVICE, socket]);
  await service.waitFor(/^ready$/);
  const p = await node(root, 'provider', url, {
    inbound: {
      policy: 'open',
      public_capabilities: [{ id: 'file.sum', files: { media_types: ['image/png'], max_count: EIGHT, max_bytes: FILE } }],
    },
    modules: { service: { capabilities: [{ id: 'file.sum', url: `unix://${socket}` }] } },
  });
  const c = await node(root, 'caller', url, {});
  const provider = start('provider daemon', [BIN, 'daemon', '--data', p.dir]);
  const caller = start('caller daemon', [BIN, 'daemon', '--data', c.dir]);
  await Promise.all([provider.waitFor(/relay stream open/), caller.waitFor(/relay stream open/)]);
  return { hub, service, provider, caller, callerDir: c.dir, providerAid: p.aid };
}

const row = (label: string, text: string, ratio = '', target = '', ok?: boolean) =>
  console.log(
    `${label.padEnd(40)} ${text.padEnd(34)} ${ratio.padEnd(10)} ${target.padEnd(16)} ${ok === undefined ? '' : ok ? 'met' : 'MISSED'}`,
  );

const byName = (figures: Record<string, number>, show: (x: number) => string) =>
  NAMES.filter((n) => figures[n] !== undefined)
    .map((n) => `${n} ${show(figures[n]!)}`)
    .join(', ');

// ---- The least the design can take ----

/** Median of 3 runs of `fn` (ms of this process's CPU, user and system). */
async function cpuOf(fn: () => unknown): Promise<number> {
  const runs: number[] = [];
  for (let i = 0; i < 3; i++) {
    const t0 = process.cpuUsage();
    await fn();
    const used = process.cpuUsage(t0);
    runs.push((used.user + used.system) / 1000);
  }
  return median(runs);
}

/** Drains an async iterable (a pass over a file's chunks). */
async function drain(source: AsyncIterable<unknown>): Promise<void> {
  for await (const _ of source);
}

interface FloorStep {
  label: string;
  ms: number;
}

/**
 * The CPU that one file's transfer needs at the least in this design, each step timed alone here (warm):
 * the caller seals the file twice (the address pass, then the upload) and hashes the sealed bytes; the
 * hub hashes them and writes them to disk; the provider opens them, hashes the plaintext (its record) and
 * encodes it as base64; the service decodes and hashes it; and the bytes cross loopback three times,
 * each crossing costed as the plain PUT's CPU (client and server) per byte. No start-up, no overhead, no
 * waiting: what any implementation of the same steps pays, so the best rate it allows on this machine.
 */
async function designFloor(dir: string, bytes: Buffer, plainCpuMs: number): Promise<FloorStep[]> {
  const key = newBlobKey();
  const size = bytes.length;
  const parts: Buffer[] = [];
  for await (const part of sealChunks(bytesSource(bytes).read(0), key, DEFAULT_CHUNK, size)) parts.push(part);
  const sealed = Buffer.concat(parts);
  const seal = await cpuOf(() => drain(sealChunks(bytesSource(bytes).read(0), key, DEFAULT_CHUNK, size, 0, { reuse: true })));
  const open = await cpuOf(() => drain(openChunks(bytesSource(sealed).read(0), key, DEFAULT_CHUNK, size, 0, { reuse: true })));
  const hash = await cpuOf(() => createHash('sha256').update(sealed).digest());
  const base64 = bytes.subarray(0, size - (size % 3));
  const slices = async () => {
    for (let at = 0; at < base64.length; at += 48 * 1024) base64.toString('base64', at, Math.min(at + 48 * 1024, base64.length));
  };
  const encode = await cpuOf(slices);
  const text = bytes.toString('base64');
  // As src/service/digest.ts reads it: each piece of the body as latin1 text, looked through for the
  // string's end, its base64 decoded into one buffer.
  const body = Buffer.from(text, 'latin1');
  const into = Buffer.allocUnsafe(48 * 1024);
  const decode = await cpuOf(() => {
    for (let at = 0; at < body.length; at += 64 * 1024) {
      const piece = body.toString('latin1', at, at + 64 * 1024);
      if (piece.indexOf('"') < 0) into.write(piece, 'base64');
    }
  });
  // As the hub stores a blob: a new file, written a piece at a time, synced every 8 MiB and at its end.
  let files = 0;
  const write = await cpuOf(() => {
    const fd = openSync(join(dir, `floor-${files++}.bin`), 'wx');
    for (let at = 0; at < sealed.length; at += MIB) {
      writeSync(fd, sealed, at, Math.min(MIB, sealed.length - at), at);
      if ((at + MIB) % (8 * MIB) === 0) fsyncSync(fd);
    }
    fsyncSync(fd);
    closeSync(fd);
  });
  for (let i = 0; i < files; i++) rmSync(join(dir, `floor-${i}.bin`));
  const perByte = plainCpuMs / size;
  return [
    { label: 'caller: seal twice (address pass, upload)', ms: 2 * seal },
    { label: 'caller: sha-256 of the sealed bytes', ms: hash },
    { label: 'hub: sha-256', ms: hash },
    { label: 'hub: write to disk, synced every 8 MiB', ms: write },
    { label: 'provider: open', ms: open },
    { label: 'provider: sha-256 of the plaintext', ms: hash },
    { label: 'provider: base64', ms: encode },
    { label: 'service: base64 decode', ms: decode },
    { label: 'service: sha-256', ms: hash },
    { label: "three loopback copies (the plain PUT's CPU per byte)", ms: perByte * (2 * sealed.length + text.length) },
  ];
}

/** The floor's steps and what they allow: the best wall time on this machine's cores, as a rate and a ratio to the plain copy. */
async function printFloor(dir: string, path: string, plainCpuMs: number, baseRate: number): Promise<void> {
  const steps = await designFloor(dir, readFileSync(path), plainCpuMs);
  const total = steps.reduce((a, s) => a + s.ms, 0);
  const best = total / cpus().length;
  console.log('\n-- the least this design takes for one 64 MiB file: each step timed alone in this process (warm, median of 3)');
  for (const s of steps) console.log(`    ${s.label.padEnd(56)} ${s.ms.toFixed(0).padStart(5)} ms`);
  console.log(
    `    in all ${secs(total)} of CPU: on ${cpus().length} cores at best ${secs(best)}, ${rate(FILE, best).toFixed(0)} MiB/s, ${(rate(FILE, best) / baseRate).toFixed(3)}x the plain copy (with no start-up, overhead or waiting)`,
  );
}

export async function benchFiles(opts: { quick: boolean }): Promise<boolean> {
  const rounds = opts.quick ? 1 : 5;
  console.log(
    `bench/files (node ${process.version}, ${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(1)} GiB; load average ${load()}; ${rounds} round${rounds > 1 ? 's' : ''})`,
  );
  console.log(
    'each its own process: hub, provider and caller daemons, digest service, `anet call` (a new one each call); baseline: HTTP PUT of the same file from disk to a node:http server (own process) that discards it, alternated with the call',
  );
  const root = await mkdtemp(join(tmpdir(), 'anet-bench-files-'));
  const onSignal = () => {
    setTimeout(() => process.exit(130), 12_000).unref();
    void stopAll()
      .then(() => rm(root, { recursive: true, force: true }))
      .finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  process.once('exit', killAll);
  try {
    return await measure(root, rounds);
  } catch (err) {
    console.log(`FAILED: ${(err as Error).message}`);
    return false;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await stopAll();
    process.off('exit', killAll);
    await rm(root, { recursive: true, force: true });
  }
}

async function measure(root: string, rounds: number): Promise<boolean> {
  const dir = join(root, 'files');
  await mkdir(dir);
  const small = await writePng(join(dir, 'warm-up.png'), MIB);
  const one = await writePng(join(dir, 'one.png'), FILE);
  const parts = await startParts(root);
  const sink = start('sink', [SINK]);
  const sinkPort = Number((await sink.waitFor(/^ready \d+$/)).split(' ')[1]);
  // Warm-up: the provider's card and KEL, connections, the sink's first request. Then one 64 MiB call not
  // counted: the hub and the daemons run for months, and a process's first large transfer grows its heap
  // (each page touched for the first time costs a fault, dear on this VM: the hub's first 64 MiB took
  // ~0.9 s of CPU, its third ~0.45 s, measured alone). The CLI is a new process every call, cold each time.
  const warm = await callFiles(parts, [small]);
  await plainPut(sinkPort, small.path, small.size);
  await callFiles(parts, [one]);
  await plainPut(sinkPort, one.path, one.size);

  // 1. One 64 MiB file, alternated with the plain copy (which goes first alternates too).
  const base: number[] = [];
  /** The plain copy's CPU time (ms): the client (this process) and the server, each round. */
  const baseCpu: { client: number; server: number }[] = [];
  const calls: CallFigures[] = [];
  for (let i = 0; i < rounds; i++) {
    const plain = async () => {
      const client = process.cpuUsage();
      const server = cpuMs(sink.pid) ?? 0;
      base.push(rate(FILE, await plainPut(sinkPort, one.path, one.size)));
      const used = process.cpuUsage(client);
      baseCpu.push({ client: (used.user + used.system) / 1000, server: (cpuMs(sink.pid) ?? 0) - server });
    };
    const call = () => callFiles(parts, [one]).then((f) => calls.push(f));
    if (i % 2 === 0) {
      await plain();
      await call();
    } else {
      await call();
      await plain();
    }
  }
  const baseRate = median(base);
  const sorted = [...calls].sort((a, b) => a.wall - b.wall);
  const mid = sorted[Math.floor(sorted.length / 2)]!;
  const callRate = rate(FILE, mid.wall);
  const ratio = callRate / baseRate;
  const okRatio = ratio >= RATIO_TARGET;
  console.log(`\n-- one 64 MiB PNG, caller -> hub -> provider -> service [load ${load()}]`);
  if (rounds > 1)
    console.log(
      `rounds: plain PUT ${base.map((r) => r.toFixed(0)).join(', ')} MiB/s; call ${calls.map((c) => rate(FILE, c.wall).toFixed(1)).join(', ')} MiB/s (medians shown)`,
    );
  row('baseline: plain PUT from disk, loopback', `${baseRate.toFixed(0)} MiB/s (${secs(((FILE / MIB) * 1000) / baseRate)})`, '1.00x');
  console.log(
    `    CPU of the plain copy: client ${secs(median(baseCpu.map((c) => c.client)))}, server ${secs(median(baseCpu.map((c) => c.server)))}`,
  );
  row(
    '`anet call --file`, one 64 MiB PNG',
    `${callRate.toFixed(1)} MiB/s (${secs(mid.wall)})`,
    `${ratio.toFixed(3)}x`,
    `>= ${RATIO_TARGET}x`,
    okRatio,
  );
  if (mid.upload !== null)
    console.log(
      `    split: start, address pass and upload ${secs(mid.upload)} (upload line: ${mid.uploadRate}); provider read, service, answer ${secs(mid.wall - mid.upload)}`,
    );
  console.log(`    CPU during the call: ${byName(mid.cpu, secs)}; in all ${secs(Object.values(mid.cpu).reduce((a, b) => a + b, 0))}`);
  console.log(`    of which system (kernel) time: ${byName(mid.sys, secs)}`);
  console.log(`    minor page faults (4 KiB pages touched the first time): ${byName(mid.faults, (n) => `${(n / 1000).toFixed(1)}k`)}`);
  console.log(`    peak RSS during the call: ${byName(mid.peaks, mb)}`);
  console.log(`    RSS as the call began: ${byName(mid.before, mb)}`);
  console.log(`    for reference, peak RSS during a 1 MiB call (the warm-up): ${byName(warm.peaks, mb)}`);
  await printFloor(dir, one.path, median(baseCpu.map((c) => c.client + c.server)), baseRate);

  // 2. Eight files of 64 MiB in one call.
  console.log(`\n-- 8 x 64 MiB PNGs in one call [load ${load()}]`);
  const eight: Sent[] = [];
  for (let i = 0; i < EIGHT; i++) eight.push(await writePng(join(dir, `scan-${i}.png`), FILE - i));
  const total = eight.reduce((s, f) => s + f.size, 0);
  const big = await callFiles(parts, eight);
  row('`anet call --file` x 8', `${secs(big.wall)} (${rate(total, big.wall).toFixed(1)} MiB/s)`);
  if (big.upload !== null)
    console.log(
      `    split: start, address passes and uploads ${secs(big.upload)} (upload line: ${big.uploadRate}); provider read, service, answer ${secs(big.wall - big.upload)}`,
    );
  console.log(`    CPU during the call: ${byName(big.cpu, secs)}`);
  console.log(`    RSS as the call began: ${byName(big.before, mb)}`);
  let okRss = true;
  for (const n of NAMES) {
    const peak = big.peaks[n];
    const ok = peak !== undefined && peak <= RSS_TARGET;
    okRss &&= ok;
    row(`    peak RSS, ${n}`, peak === undefined ? 'not read' : mb(peak), '', `<= ${mb(RSS_TARGET)}`, ok);
  }
  console.log(
    `sha-256 of every file, as the service computed it and as the caller got it: equal to the file's (${rounds + EIGHT + 1} files)`,
  );
  console.log(`load average at the end: ${load()}`);
  await sink.stop();
  return okRatio && okRss;
}
