// A real streaming service (SPEC §3, issue 21) on a Unix socket, for tests: it answers every POST with
// `Content-Type: text/event-stream` — `event: progress` events spaced by `delayMs`, then one `event: result`
// (or `event: error`) — and counts the requests whose connection the node closed before the answer ended
// (a cancel, a stop, a timeout), so a test can assert "the service saw its request aborted".
//
//   const dir = await privateSocketDir(t);
//   const svc = await streamService(join(dir, 'svc.sock'), { progress: 3, delayMs: 50, result: { ok: true } });
//   t.teardown(() => svc.close());
//   ... // config: services: { 'x.y': `unix://${dir}/svc.sock` }
//   t.is(svc.aborted, 1);
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { ExecutionContext } from 'ava';
import { listenOnSocket } from '../../src/service/sample.js';
import type { Preview } from '../../src/protocol/preview.js';
import { tempDir } from './tmp.js';

export interface StreamServiceOptions {
  /** The `progress` events, or how many `{"text": "step <i>"}` ones (1-based). Default: none. */
  progress?: Preview[] | number;
  /** Milliseconds before each progress event and before the final event. Default 0. */
  delayMs?: number;
  /** The `result` event's object. Default `{"done": true}`. */
  result?: Record<string, unknown>;
  /** Sends `event: error` with this data instead of a result. */
  error?: { status: number; error: string };
  /** After this many progress events (at most all), sends nothing more and keeps the connection open (for cancels, timeouts). */
  hangAfter?: number;
  /** Called for each request once its body is read; `aborted` settles when the node closes it early. */
  onRequest?(info: { aborted: Promise<void>; body: string; headers: IncomingMessage['headers'] }): void;
}

export interface StreamService {
  socketPath: string;
  /** Requests received so far. */
  readonly requests: number;
  /** Requests whose connection closed before the service had written its whole answer. */
  readonly aborted: number;
  /** Closes the service and every connection it still holds. */
  close(): Promise<void>;
}

/** A directory for service sockets that passes the §3.2 check (mode 0700 under a fresh temp dir). */
export async function privateSocketDir(t: ExecutionContext): Promise<string> {
  const dir = join(await tempDir(t), 'run');
  await mkdir(dir, { mode: 0o700 });
  return dir;
}

/** One SSE event as a service writes it (data on one line: JSON.stringify never writes a newline). */
export function sseEvent(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function streamService(socketPath: string, opts: StreamServiceOptions = {}): Promise<StreamService> {
  const progress =
    typeof opts.progress === 'number'
      ? Array.from({ length: opts.progress }, (_, i): Preview => ({ text: `step ${i + 1}` }))
      : (opts.progress ?? []);
  const counts = { requests: 0, aborted: 0 };
  const server = createServer((req, res) => {
    counts.requests++;
    // Decided by the response, not the request: 'close' before the answer finished means the node hung up.
    const aborted = new Promise<void>((resolve) =>
      res.on('close', () => {
        if (!res.writableFinished) {
          counts.aborted++;
          resolve();
        }
      }),
    );
    void readBody(req).then((body) => {
      opts.onRequest?.({ aborted, body, headers: req.headers });
      return answer(res, progress, opts);
    });
  });
  const listening = await listenOnSocket(server, socketPath);
  return {
    socketPath,
    get requests() {
      return counts.requests;
    },
    get aborted() {
      return counts.aborted;
    },
    close() {
      // A hanging answer would keep server.close() waiting for ever.
      server.closeAllConnections();
      return listening.close();
    },
  };
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function answer(res: ServerResponse, progress: Preview[], opts: StreamServiceOptions): Promise<void> {
  const delayMs = opts.delayMs ?? 0;
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.flushHeaders();
  for (const preview of progress.slice(0, opts.hangAfter ?? progress.length)) {
    if (delayMs > 0) await sleep(delayMs);
    if (res.destroyed) return;
    res.write(sseEvent('progress', preview));
  }
  // A hanging service never ends its answer: only the node (a cancel, a timeout, a stop) ends the request.
  if (opts.hangAfter !== undefined) return;
  if (delayMs > 0) await sleep(delayMs);
  if (res.destroyed) return;
  res.end(opts.error ? sseEvent('error', opts.error) : sseEvent('result', opts.result ?? { done: true }));
}
