// A raw JSON-RPC client of a daemon's local A2A endpoint (A2A v1.0 over HTTP, the bearer token of the
// data dir), for requests the official SDK cannot make or hostile tests need as they are on the wire.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Daemon } from '../../src/daemon/daemon.js';

export type Rpc = (method: string, params: Record<string, unknown>) => Promise<{ result?: any; error?: any }>;

/** JSON-RPC to `daemon`'s A2A endpoint for agent `aid`, authenticated with the token in `dataDir`. */
export async function a2aRpc(daemon: Daemon, dataDir: string, aid: string): Promise<Rpc> {
  const token = (await readFile(join(dataDir, 'a2a.token'), 'utf8')).trim();
  return async (method, params) => {
    const res = await fetch(`${daemon.a2a!.agentUrl(aid)}jsonrpc`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'a2a-version': '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
    return (await res.json()) as { result?: any; error?: any };
  };
}
