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

export interface Daemon {
  node: Node;
  published: Promise<void>;
  /** The local A2A endpoint (SPEC §12); null when its address could not be bound. */
  a2a: A2aEndpoint | null;
  close(): Promise<void>;
}

export type DaemonLog = (line: string) => void;

const RETRY_MS = 5000;

export async function startDaemon(dataDir: string, log: DaemonLog, opts: { clock?: Clock } = {}): Promise<Daemon> {
  // Start-up checks of the key files: a damaged enc.cbor would leave the node deaf (every message dropped).
  const keys = await checkKeyFile(dataDir);
  if (keys) throw new Error(keys);
  const loose = await identityModeProblem(dataDir);
  if (loose) log(`warning: ${loose}`);
  const node = await Node.open(dataDir, { runtime: true, log, ...opts });
  let closed = false;
  let retry: NodeJS.Timeout | undefined;
  let server: Server | undefined;
  let a2a: A2aEndpoint | null = null;
  try {
    server = await serveControl(dataDir, node);
    a2a = await startA2a({ dataDir, address: node.config.local.a2a, operate: operatorOf(node) }, log);
  } catch (err) {
    server?.close();
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
        log(`${(err as Error).message}${err instanceof HubUnreachableError ? `; retrying every ${RETRY_MS / 1000} s` : ''}`);
        if (!closed && err instanceof HubUnreachableError) retry = setTimeout(attempt, RETRY_MS);
        else resolve();
      }
    };
    void attempt();
  });
  return {
    node,
    published,
    a2a,
    close: async () => {
      closed = true;
      clearTimeout(retry);
      await a2a?.close();
      server!.closeAllConnections();
      await new Promise<void>((resolve) => server!.close(() => resolve()));
      await unlink(controlPath(dataDir)).catch(() => {});
      await node.close();
    },
  };
}
