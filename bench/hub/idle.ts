// bench/hub, idle connections: what an idle push stream and an idle upstream cost a hub in its own
// process (RSS and V8 heap after two full GCs, measured as they are opened in steps: the slope),
// against an idle keep-alive connection to the plain node:http server measured the same way.
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { UPSTREAM_PROTOCOL } from '../../src/protocol/relay.js';
import { RelayClient } from '../../src/relay/client.js';
import { type Mem, childHub, keepAlive, memoryIdentity, plainServer, pool, register } from './common.js';

export interface Growth {
  n: number;
  /** Bytes per connection. */
  rss: number;
  heap: number;
  external: number;
}

/** Least-squares slope of y over x. */
function slope(xs: number[], ys: number[]): number {
  const mx = xs.reduce((a, b) => a + b, 0) / xs.length;
  const my = ys.reduce((a, b) => a + b, 0) / ys.length;
  let num = 0;
  let den = 0;
  for (let i = 0; i < xs.length; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my);
    den += (xs[i]! - mx) ** 2;
  }
  return num / den;
}

const STEPS = 5;

/**
 * Opens `n` connections in STEPS steps, measuring memory (after full GCs) before and after each step:
 * the cost of one is the slope through those points (RSS moves in steps of whole pages and V8 spaces,
 * so one before-and-after pair scatters by several KiB a connection at n = 1000; the slope does not).
 */
async function growth(mem: () => Promise<Mem>, n: number, open: (k: number) => Promise<void>): Promise<Growth> {
  const counts = [0];
  const points = [await mem()];
  for (let step = 1; step <= STEPS; step++) {
    const upTo = Math.round((n * step) / STEPS);
    await open(upTo - counts[counts.length - 1]!);
    counts.push(upTo);
    points.push(await mem());
  }
  return {
    n,
    rss: slope(
      counts,
      points.map((p) => p.rss),
    ),
    heap: slope(
      counts,
      points.map((p) => p.heapUsed),
    ),
    external: slope(
      counts,
      points.map((p) => p.external),
    ),
  };
}

/** A raw connection that sends `request` and resolves once the answer's first line starts with `expect`. */
function rawConnection(url: string, request: string, expect: string): Promise<Socket> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: u.hostname, port: Number(u.port) });
    let seen = '';
    socket.on('error', reject);
    socket.on('data', (chunk: Buffer) => {
      if (seen.length > 200) return;
      seen += chunk.toString('latin1');
      if (seen.includes('\r\n')) {
        if (seen.startsWith(expect)) resolve(socket);
        else reject(new Error(`expected ${expect}, got ${seen.split('\r\n')[0]}`));
      }
    });
    socket.write(request);
  });
}

/**
 * Idle keep-alive connections to a fresh plain server, each after one POST answered. (Each measure has a
 * process of its own: memory freed by an earlier one would be reused and hide what the next one costs.)
 */
export async function idlePlain(n: number): Promise<Growth> {
  const plain = await plainServer();
  try {
    const req = 'POST / HTTP/1.1\r\nHost: bench\r\nContent-Length: 0\r\n\r\n';
    (await rawConnection(plain.url, req, 'HTTP/1.1 202')).destroy();
    const sockets: Socket[] = [];
    const g = await growth(plain.mem, n, (k) =>
      pool(k, 32, async () => void sockets.push(await rawConnection(plain.url, req, 'HTTP/1.1 202'))),
    );
    for (const s of sockets) s.destroy();
    return g;
  } finally {
    await plain.stop();
  }
}

/** Idle push streams of `n` registered AIDs to a hub on LevelDB. */
export async function idleStreams(root: string, n: number): Promise<Growth> {
  const hub = await childHub({ dataDir: join(root, 'idle-streams') });
  const agent = keepAlive(32);
  try {
    const ids = Array.from({ length: n }, () => memoryIdentity());
    await pool(n, 32, (i) => register(agent, hub.url, ids[i]!, `idle${i}`).then(() => {}));
    agent.destroy();
    // One stream opened and closed first: the code paths' first use is not counted per connection.
    const warm = new RelayClient(hub.url, ids[0]!, () => {});
    await warm.connect();
    warm.close();
    const clients = ids.map((id) => new RelayClient(hub.url, id, () => {}));
    let opened = 0;
    const streams = await growth(hub.mem, n, (k) => {
      const from = opened;
      opened += k;
      return pool(k, 32, (i) => clients[from + i]!.connect());
    });
    for (const c of clients) c.close();
    return streams;
  } finally {
    agent.destroy();
    await hub.stop();
  }
}

/** `n` idle upstreams (anonymous: no registration) to a fresh hub on LevelDB. */
export async function idleUpstreams(root: string, n: number): Promise<Growth> {
  const hub = await childHub({ dataDir: join(root, 'idle-upstreams') });
  try {
    const req = `GET /relay/v2/upstream HTTP/1.1\r\nHost: bench\r\nConnection: Upgrade\r\nUpgrade: ${UPSTREAM_PROTOCOL}\r\n\r\n`;
    (await rawConnection(hub.url, req, 'HTTP/1.1 101')).destroy();
    const sockets: Socket[] = [];
    const upstreams = await growth(hub.mem, n, (k) =>
      pool(k, 32, async () => void sockets.push(await rawConnection(hub.url, req, 'HTTP/1.1 101'))),
    );
    for (const s of sockets) s.destroy();
    return upstreams;
  } finally {
    await hub.stop();
  }
}
