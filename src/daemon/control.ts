// The control socket (SPEC §12): `<data>/control.sock`, mode 0600, HTTP with JSON bodies. It serves
// exactly the node's table of operations (src/node/operations.ts): `POST /<op>` with the arguments as the
// body; and `GET /metrics`, the node's Prometheus metrics (metrics.ts). The CLI and `anet mcp` talk to a
// running daemon through it (src/node/open.ts, `run`); without a daemon they run the same operation
// in-process.
import { createServer, type Server } from 'node:http';
import { chmod, unlink } from 'node:fs/promises';
import type { Node } from '../node/node.js';
import { isOpName, operate, wireArgs } from '../node/operations.js';
import { controlPath, NDJSON, type ControlReply } from '../node/open.js';
import type { ArgsOf, TaskUpdate } from '../node/operations.js';
import { jsonReplacer } from '../util/json.js';
import { writeUpdate } from '../util/stream.js';
import { answerMetrics } from './metrics.js';

export async function serveControl(dataDir: string, node: Node): Promise<Server> {
  const path = controlPath(dataDir);
  await unlink(path).catch(() => {});
  const server = createServer(async (req, res) => {
    if (req.method === 'GET' && req.url === '/metrics') return answerMetrics(node.metrics, res).catch(() => res.destroy());
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const op = (req.url ?? '/').slice(1);
    // A client that follows the task gets each update as a line while the operation runs (open.ts).
    const streamed = req.headers.accept === NDJSON;
    if (streamed) res.writeHead(200, { 'content-type': NDJSON });
    const onUpdate = (u: TaskUpdate) => {
      writeUpdate(res, `${JSON.stringify({ update: u }, jsonReplacer)}\n`);
    };
    // A follower that hangs up (Ctrl-C on `anet call`) stops the wait here too; its task goes on.
    const gone = new AbortController();
    res.on('close', () => res.writableEnded || gone.abort());
    let reply: ControlReply;
    try {
      const args = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : {};
      reply = { ok: true, result: await answer(node, op, streamed ? { ...args, onUpdate, signal: gone.signal } : args) };
    } catch (err) {
      reply = { ok: false, error: (err as Error).message, name: (err as Error).name };
    }
    if (!streamed) res.writeHead(200, { 'content-type': 'application/json' });
    res.end(reply.ok ? JSON.stringify(reply, jsonReplacer) : JSON.stringify(reply));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => resolve());
  });
  await chmod(path, 0o600);
  return server;
}

/**
 * One operation of the table, its arguments checked against the operation's (the socket is 0600 and its
 * usual client is this program's `run`, but a hand-written client gets a line naming a wrong field, never
 * a crash inside the node).
 */
function answer(node: Node, op: string, args: { onUpdate?: (u: TaskUpdate) => void; signal?: AbortSignal }): Promise<unknown> {
  if (!isOpName(op)) throw new Error(`unknown control operation "${op}"`);
  // Checked without what never comes over the wire (the callback, the signal), then given them back.
  const { onUpdate, signal, ...wire } = args;
  return operate(node, op, { ...wireArgs(op, wire), ...(onUpdate ? { onUpdate, signal } : {}) } as ArgsOf<typeof op>);
}
