// `anet daemon`: holds the node open, publishes its card at start (retrying while the hub is down), then
// opens its relay stream (peer messages), and serves the control socket for the CLI and the local A2A
// endpoint (src/a2a/).
import type { Server } from 'node:http';
import { unlink } from 'node:fs/promises';
import { Node } from '../node/node.js';
import { serveControl } from './control.js';
import { operatorOf } from '../node/operations.js';
import { controlPath } from '../node/open.js';
import { HubUnreachableError } from '../hub-client/client.js';
import type { Clock } from '../runtime/clock.js';
import { startA2a, type A2aEndpoint } from '../a2a/server.js';
import { checkKeyFile } from '../relay/keyset.js';
import { identityModeProblem } from '../identity/store.js';
import type { Log } from '../util/log.js';
import { metricsAddress, serveMetrics } from './metrics.js';

export { metricsAddress } from './metrics.js';

export interface Daemon {
  node: Node;
  published: Promise<void>;
  /** The local A2A endpoint (SPEC §12); null when its address could not be bound. */
  a2a: A2aEndpoint | null;
  /** `--metrics`: where the metrics are served on HTTP; null without it. */
  metricsUrl: string | null;
  close(): Promise<void>;
}

/** How the daemon logs (src/util/log.ts): `log(line)` at info, a second argument for another level. */
export type DaemonLog = Log;

export interface DaemonOptions {
  clock?: Clock;
  /** `--metrics 127.0.0.1:PORT`: the metrics on HTTP too (loopback only; metrics.ts). */
  metrics?: string;
}

const RETRY_MS = 5000;

export async function startDaemon(dataDir: string, log: DaemonLog, opts: DaemonOptions = {}): Promise<Daemon> {
  // Refused before anything starts: a daemon must not serve its metrics beyond this machine.
  const metricsAt = opts.metrics === undefined ? undefined : metricsAddress(opts.metrics);
  if (typeof metricsAt === 'string') throw new Error(metricsAt);
  // Start-up checks of the key files: a damaged enc.cbor would leave the node deaf (every message dropped).
  const keys = await checkKeyFile(dataDir);
  if (keys) throw new Error(keys);
  const loose = await identityModeProblem(dataDir);
  if (loose) log(loose, 'warn');
  const node = await Node.open(dataDir, { runtime: true, log, ...(opts.clock ? { clock: opts.clock } : {}) });
  node.metrics.withProcessMetrics();
  let closed = false;
  let retry: NodeJS.Timeout | undefined;
  let server: Server | undefined;
  let metricsServer: Server | undefined;
  let metricsUrl: string | null = null;
  let a2a: A2aEndpoint | null = null;
  try {
    server = await serveControl(dataDir, node);
    if (metricsAt) {
      metricsServer = await serveMetrics(metricsAt, node.metrics);
      metricsUrl = urlOf(metricsServer);
      log(`metrics on ${metricsUrl}`);
    }
    a2a = await startA2a({ dataDir, address: node.config.local.a2a, operate: operatorOf(node) }, log);
  } catch (err) {
    server?.close();
    metricsServer?.close();
    await node.close();
    throw err;
  }
  const published = new Promise<void>((resolve) => {
    let done = false;
    const attempt = async () => {
      try {
        if (!done) {
          const { own, outcome } = await node.publish();
          log(
            outcome === 'published'
              ? `card seq ${own.seq} published to ${node.config.hub}`
              : `no capability offered: card withdrawn from ${node.config.hub}`,
          );
          done = true;
        }
        // Registered: now the hub accepts our key set and our signed relay stream.
        await node.network();
        log(`relay stream open on ${node.config.hub}`);
        resolve();
      } catch (err) {
        const unreachable = err instanceof HubUnreachableError;
        log(`${(err as Error).message}${unreachable ? `; retrying every ${RETRY_MS / 1000} s` : ''}`, unreachable ? 'warn' : 'error');
        if (!closed && err instanceof HubUnreachableError) retry = setTimeout(attempt, RETRY_MS);
        else resolve();
      }
    };
    void attempt();
  });
  return {
    node,
    metricsUrl,
    published,
    a2a,
    close: async () => {
      closed = true;
      clearTimeout(retry);
      await a2a?.close();
      metricsServer?.closeAllConnections();
      metricsServer?.close();
      server!.closeAllConnections();
      await new Promise<void>((resolve) => server!.close(() => resolve()));
      await unlink(controlPath(dataDir)).catch(() => {});
      await node.close();
    },
  };
}

/** `http://127.0.0.1:9464/metrics` (the port the server got: 0 asks for a free one). */
function urlOf(server: Server): string {
  const a = server.address();
  if (typeof a !== 'object' || !a) return '';
  return `http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}/metrics`;
}
