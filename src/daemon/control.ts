// The control socket (SPEC §12): `<data>/control.sock`, mode 0600, HTTP with JSON bodies. The CLI talks
// to a running daemon through it; without a daemon the CLI does the same work in-process.
import { createServer, request, type Server } from 'node:http';
import { chmod, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { jsonReplacer } from '../cli/output.js';

export const controlPath = (dataDir: string) => join(dataDir, 'control.sock');

export type ControlHandler = (op: string, args: Record<string, unknown>) => Promise<unknown>;

export async function serveControl(dataDir: string, handler: ControlHandler): Promise<Server> {
  const path = controlPath(dataDir);
  await unlink(path).catch(() => {});
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const op = (req.url ?? '/').slice(1);
    try {
      const args = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : {};
      const result = await handler(op, args);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok: true, result }, jsonReplacer));
    } catch (err) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok: false, error: (err as Error).message, name: (err as Error).name }));
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => resolve());
  });
  await chmod(path, 0o600);
  return server;
}

export class ControlError extends Error {
  constructor(message: string, readonly remoteName: string) {
    super(message);
  }
}

/** Calls the daemon; undefined when no daemon listens on the data dir's control socket. */
export function callDaemon(dataDir: string, op: string, args: Record<string, unknown>): Promise<unknown | undefined> {
  return new Promise((resolve, reject) => {
    const body = Buffer.from(JSON.stringify(args));
    const req = request({ socketPath: controlPath(dataDir), path: `/${op}`, method: 'POST', agent: false, headers: { 'content-type': 'application/json' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const reply = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        if (reply.ok) resolve(reply.result);
        else reject(new ControlError(reply.error, reply.name));
      });
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT' || err.code === 'ECONNREFUSED') resolve(undefined);
      else reject(err);
    });
    req.end(body);
  });
}
