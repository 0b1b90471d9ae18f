// Small sample services on Unix sockets, used by `anet demo` and the tests: real HTTP servers that
// answer the service contract of SPEC §3.
import { createServer, type IncomingMessage, type ServerResponse, type Server } from 'node:http';
import { unlink, chmod } from 'node:fs/promises';

export type SampleHandler = (body: unknown, req: IncomingMessage, res: ServerResponse) => unknown | Promise<unknown>;

export interface SampleService {
  socketPath: string;
  server: Server;
  close(): Promise<void>;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export async function startSampleService(socketPath: string, handler: SampleHandler): Promise<SampleService> {
  await unlink(socketPath).catch(() => {});
  const server = createServer(async (req, res) => {
    try {
      const text = await readBody(req);
      const result = await handler(text ? JSON.parse(text) : null, req, res);
      if (!res.headersSent) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(result));
      }
    } catch (err) {
      if (!res.headersSent) res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: (err as Error).message }));
    }
  });
  return listenOnSocket(server, socketPath);
}

/** Listens on a Unix socket only its owner may use (mode 0600, SPEC §3.2); how to close it. */
export async function listenOnSocket(server: Server, socketPath: string): Promise<SampleService> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve());
  });
  await chmod(socketPath, 0o600);
  return {
    socketPath,
    server,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The demo's echo capability: returns its arguments. */
export const echoHandler: SampleHandler = (body) => ({ echo: body });

/** The demo's priced capability: reverses `text`. */
export const reverseHandler: SampleHandler = (body) => {
  const text = (body as { text?: unknown })?.text;
  if (typeof text !== 'string') throw new Error('args.text must be a string');
  return { text: [...text].reverse().join('') };
};
