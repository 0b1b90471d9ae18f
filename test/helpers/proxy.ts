// A load balancer in front of hub replicas, as small as a test needs: a TCP proxy on loopback that sends
// each new connection to the first backend that accepts it, in the order given. When a replica dies, its
// connections break and new ones go to the next: what a real balancer's health checks do, sooner.
import type { ExecutionContext } from 'ava';
import { createServer, connect, type Socket } from 'node:net';

export interface Proxy {
  url: string;
  /** Backends tried first for new connections (ports), in order. */
  ports: number[];
}

function dial(ports: number[], i = 0): Promise<Socket> {
  return new Promise((resolve, reject) => {
    if (i >= ports.length) return reject(new Error('no backend accepts connections'));
    const s = connect(ports[i]!, '127.0.0.1');
    s.once('connect', () => resolve(s));
    s.once('error', () => {
      s.destroy();
      dial(ports, i + 1).then(resolve, reject);
    });
  });
}

export async function failoverProxy(t: ExecutionContext, ports: number[]): Promise<Proxy> {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    sockets.add(client);
    client.pause();
    dial(ports).then(
      (upstream) => {
        sockets.add(upstream);
        client.pipe(upstream).pipe(client);
        client.resume();
        const end = () => {
          client.destroy();
          upstream.destroy();
        };
        for (const s of [client, upstream]) {
          s.once('close', end);
          s.once('error', end);
        }
      },
      () => client.destroy(),
    );
    client.once('close', () => sockets.delete(client));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, ports };
}
