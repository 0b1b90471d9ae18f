// The node's metrics over HTTP (issue 22): `GET /metrics` on the control socket (control.ts), and on
// `anet daemon --metrics 127.0.0.1:PORT` for a Prometheus that cannot read a unix socket. Loopback only:
// the counters say when and how much the node works, which is the operator's to publish or not (a
// reverse proxy or an SSH tunnel takes them further, with its own access control).
import { createServer, type Server, type ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import type { NodeMetrics } from '../node/metrics.js';

/** Answers one scrape. */
export async function answerMetrics(metrics: NodeMetrics, res: ServerResponse): Promise<void> {
  const { type, text } = await metrics.scrape();
  res.writeHead(200, { 'content-type': type, 'cache-control': 'no-store' });
  res.end(text);
}

const LOOPBACK = /^(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|::1)$/;

/** `127.0.0.1:9464`, `[::1]:9464`, `localhost:9464` → where to listen; a string naming the fix otherwise. */
export function metricsAddress(text: string): { host: string; port: number } | string {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(text);
  const host = m ? (m[1] ?? m[2]!) : '';
  const port = m ? Number(m[3]) : -1;
  const where = host === 'localhost' ? '127.0.0.1' : host;
  if (!m || port > 65535 || !isIP(where) || !LOOPBACK.test(where))
    return `--metrics takes a loopback address and port (127.0.0.1:9464 or [::1]:9464), not "${text}": metrics are served to this machine only; scrape them from elsewhere through a reverse proxy or an SSH tunnel`;
  return { host: where, port };
}

/** Serves `GET /metrics` alone on a loopback address. */
export async function serveMetrics(where: { host: string; port: number }, metrics: NodeMetrics): Promise<Server> {
  const server = createServer((req, res) => {
    if (req.method !== 'GET' || req.url !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' });
      return void res.end('only GET /metrics here\n');
    }
    answerMetrics(metrics, res).catch(() => res.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(where.port, where.host, () => resolve());
  });
  return server;
}
