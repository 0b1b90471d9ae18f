// Running an operation of the table (operations.ts) on the node of a data dir: through the running
// daemon's control socket (`<data>/control.sock`, SPEC §12) when one listens, else on the node opened in
// this process for that operation alone. This is how the CLI and `anet mcp` reach the node, so both agree
// with the daemon; the daemon's side of the socket is src/daemon/control.ts.
import { request } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import type { ArgsOf, OpName, ResultOf, TaskUpdate } from './operations.js';

export const controlPath = (dataDir: string) => join(dataDir, 'control.sock');

/** The control socket's answer to `POST /<op>` with the arguments as a JSON body. */
export type ControlReply = { ok: true; result: unknown } | { ok: false; error: string; name: string };

/**
 * Asked with this `Accept`, an operation that follows a task (its arguments take `onUpdate`) answers with
 * NDJSON: one `{"update": TaskUpdate}` line per update as it happens, then the ControlReply line.
 */
export const NDJSON = 'application/x-ndjson';

/** An operation the daemon ran and refused or failed: its message, and the name of its error there. */
export class ControlError extends Error {
  override name = 'ControlError';
  constructor(
    message: string,
    readonly remoteName: string,
  ) {
    super(message);
  }
}

/**
 * Runs `op` on the data dir's node. `here` changes the arguments only when the node runs in this process
 * (say, a longer wait with progress: through the daemon the CLI waits briefly and polls instead).
 */
export async function run<K extends OpName>(dataDir: string, op: K, args: ArgsOf<K>, here: Partial<ArgsOf<K>> = {}): Promise<ResultOf<K>> {
  const remote = await askDaemon(dataDir, op, args);
  if (remote !== undefined) return remote;
  // Loaded only without a daemon: a command that goes through the daemon (most, on a running node) does
  // not load the node's code at all (~45 MB less in \`anet call\`, whose upload should stay small).
  const [{ Node }, { operate }] = await Promise.all([import('./node.js'), import('./operations.js')]);
  const node = await Node.open(dataDir);
  try {
    return await operate(node, op, { ...args, ...here });
  } finally {
    await node.close();
  }
}

/**
 * Runs `op` through the daemon; undefined when no daemon listens on the data dir's control socket. An
 * `onUpdate` in the arguments is told of each update the daemon streams back (NDJSON).
 */
export function askDaemon<K extends OpName>(dataDir: string, op: K, args: ArgsOf<K>): Promise<ResultOf<K> | undefined> {
  const onUpdate = (args as { onUpdate?: (u: TaskUpdate) => void }).onUpdate;
  return new Promise((resolve, reject) => {
    const body = Buffer.from(JSON.stringify(args));
    const headers: Record<string, string> = { 'content-type': 'application/json', ...(onUpdate ? { accept: NDJSON } : {}) };
    // Its own connection, not an agent's: an agent works out a TLS server name from the host, `localhost`,
    // and node's IPv6 check of it compiles a regex that cost every command ~10 ms of its start (measured).
    const socket = () => connect(controlPath(dataDir));
    const req = request({ createConnection: socket, path: `/${op}`, method: 'POST', headers }, (res) => {
      const finish = (line: string) => {
        const reply = JSON.parse(line) as ControlReply;
        if (reply.ok) resolve(reply.result as ResultOf<K>);
        else reject(new ControlError(reply.error, reply.name));
      };
      let rest = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        rest += c;
        // Every line but the last is an update; the last is the reply, read at the end.
        for (let nl = rest.indexOf('\n'); nl >= 0 && onUpdate; nl = rest.indexOf('\n')) {
          const line = rest.slice(0, nl);
          rest = rest.slice(nl + 1);
          const parsed = JSON.parse(line) as { update?: TaskUpdate } & Partial<ControlReply>;
          if (parsed.update) onUpdate(parsed.update);
          else return finish(line);
        }
      });
      res.on('end', () => rest.trim() && finish(rest));
      res.on('error', reject);
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT' || err.code === 'ECONNREFUSED') resolve(undefined);
      else reject(err);
    });
    req.end(body);
  });
}
