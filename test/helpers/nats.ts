// A real `nats-server` for tests of hub replicas (issue 19): Debian's package (`apt-get install -y
// nats-server`; `.ci/run` installs it when missing). Started on a free loopback port in the test and
// stopped by its teardown. Without the binary, `natsServer` answers null after printing one line saying
// what did not run and how to install it; under CI=true a missing binary fails the test instead.
import type { ExecutionContext } from 'ava';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { freePort } from './postgres.js';

// Debian puts it in /usr/sbin, which a user's PATH may not hold.
const BINARY = process.env.NATS_SERVER ?? (existsSync('/usr/sbin/nats-server') ? '/usr/sbin/nats-server' : 'nats-server');
const INSTALL = 'install it with `sudo apt-get install -y nats-server` (or set NATS_SERVER to its path)';

let told = false;

/** Whether the nats-server binary runs here. */
export function hasNatsServer(): boolean {
  const r = spawnSync(BINARY, ['--version'], { encoding: 'utf8' });
  return r.status === 0;
}

export interface NatsServer {
  url: string;
  /** Stops it (SIGTERM, then waits for the exit). */
  stop(): Promise<void>;
}

/** A nats-server on loopback for this test, or null (printed once) when the binary is missing outside CI. */
export async function natsServer(t: ExecutionContext): Promise<NatsServer | null> {
  if (!hasNatsServer()) {
    const line = `nats-server not found: the hub replica tests did not run; ${INSTALL}`;
    if (process.env.CI === 'true') {
      t.fail(line);
      return null;
    }
    if (!told) console.log(line);
    told = true;
    t.log(line);
    return null;
  }
  const port = await freePort();
  const child = spawn(BINARY, ['-a', '127.0.0.1', '-p', String(port)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Server is ready')) resolve();
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`nats-server exited (${code}) before it was ready: ${output.slice(-400)}`)));
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  t.teardown(stop);
  return { url: `nats://127.0.0.1:${port}`, stop };
}
