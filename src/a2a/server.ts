// The local A2A endpoint (SPEC §12): node:http on `local.a2a` (loopback or a Unix socket), every request
// authorised by the bearer token in `<data>/a2a.token`. For each remote agent, by AID:
//   GET  /a2a/v1/agents/<aid>/.well-known/agent-card.json   its public card, pointing here (card.ts)
//   POST /a2a/v1/agents/<aid>/jsonrpc                       A2A v1.0 JSON-RPC (rpc.ts)
// so a standard A2A client given `<origin>/a2a/v1/agents/<aid>/` talks to that agent through this node.
import { createServer, type IncomingMessage, type ServerResponse, type Server } from 'node:http';
import { chmod, unlink } from 'node:fs/promises';
import { stringify as stringifyLossless } from 'lossless-json';
import { MAX_ENVELOPE } from '../protocol/relay.js';
import { isAid } from '../identity/cid.js';
import { parseListen, originOf, type Listen } from './address.js';
import { ensureToken, bearerMatches } from './token.js';
import { a2aTokenPath } from '../config/environment.js';
import type { Log } from '../util/log.js';
import { writeUpdate } from '../util/stream.js';
import { answerRpc, asRpcError, failure, isStreamingRequest, type Id } from './rpc.js';
import type { Operate } from '../node/operations.js';
import { BodyParser } from './parse.js';
import { localCard } from './card.js';
import { PushConfigs } from './push.js';
import { requestedVersion } from './version.js';
import type { StreamResponse } from './events.js';
import type { Channel } from './channel.js';

export interface A2aEndpoint {
  /** Where it listens: the http origin (`http://localhost` for a Unix socket) and the bound address. */
  origin: string;
  listen: Listen;
  /** `<origin>/a2a/v1/agents/<aid>/`: the base URL a client resolves the agent's card from. */
  agentUrl(aid: string): string;
  close(): Promise<void>;
}

/**
 * Files travel as base64 inside the body and are held in memory until the node has uploaded them as blobs
 * (issue 20), so the body stays bounded: 2 × (16 MiB + 4 KiB), 33,562,624 bytes, "32 MiB" in the docs.
 * Larger files go with `anet call --file`, read from disk.
 */
export const MAX_BODY = 2 * MAX_ENVELOPE;
const ROUTE = /^\/a2a\/v1\/agents\/([^/]+)\/(\.well-known\/agent-card\.json|jsonrpc)$/;

/** What the endpoint needs of its daemon: the node's data dir, its `local.a2a` address and its operations. */
export interface EndpointNode {
  dataDir: string;
  address: string;
  operate: Operate;
}

/**
 * Starts the endpoint. A bad address or token file throws (one line: the operator must fix it); an
 * address that cannot be bound (in use, say) is logged and gives null: the node works without it.
 */
export async function startA2a(node: EndpointNode, log: Log): Promise<A2aEndpoint | null> {
  const listen = parseListen(node.address);
  const token = await ensureToken(node.dataDir);
  let origin = '';
  const parser = new BodyParser();
  const push = new PushConfigs(node.operate, log);
  const server = createServer((req, res) => void handle({ node, token, origin, parser, push }, req, res));
  try {
    origin = originOf(listen, await bind(server, listen));
  } catch (err) {
    log(
      `local A2A endpoint not started: cannot listen on ${node.address} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
      'warn',
    );
    return null;
  }
  const agentUrl = (aid: string) => `${origin}/a2a/v1/agents/${aid}/`;
  log(
    `local A2A endpoint ${agentUrl('<aid>')}${listen.kind === 'unix' ? ` on ${listen.path}` : ''} (bearer token in ${a2aTokenPath(node.dataDir)})`,
  );
  return {
    origin,
    listen,
    agentUrl,
    close: async () => {
      push.close();
      server.closeAllConnections();
      await Promise.all([new Promise<void>((resolve) => server.close(() => resolve())), parser.close()]);
      if (listen.kind === 'unix') await unlink(listen.path).catch(() => {});
    },
  };
}

/** Listens; resolves with the bound port (0 for a Unix socket). */
async function bind(server: Server, listen: Listen): Promise<number> {
  if (listen.kind === 'unix') await unlink(listen.path).catch(() => {});
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    if (listen.kind === 'unix') server.listen(listen.path, () => resolve());
    else server.listen(listen.port, listen.host, () => resolve());
  });
  if (listen.kind === 'unix') {
    await chmod(listen.path, 0o600);
    return 0;
  }
  return (server.address() as { port: number }).port;
}

/** What every request is handled with. */
interface Endpoint {
  node: EndpointNode;
  token: string;
  origin: string;
  parser: BodyParser;
  push: PushConfigs;
}

async function handle({ node, token, origin, parser, push }: Endpoint, req: IncomingMessage, res: ServerResponse): Promise<void> {
  try {
    if (!bearerMatches(req.headers.authorization, token)) {
      return send(
        res,
        401,
        { error: 'a bearer token is required: Authorization: Bearer <the token in a2a.token of the data dir>' },
        { 'www-authenticate': 'Bearer' },
      );
    }
    const url = new URL(req.url ?? '/', 'http://localhost');
    const route = ROUTE.exec(url.pathname);
    const aid = route?.[1] ?? '';
    if (!route || !isAid(aid))
      return send(res, 404, {
        error: `no such resource: ${url.pathname} (expected /a2a/v1/agents/<full AID>/.well-known/agent-card.json or /jsonrpc)`,
      });
    if (route[2] === 'jsonrpc') {
      if (req.method !== 'POST') return send(res, 405, { error: 'JSON-RPC takes POST' }, { allow: 'POST' });
      const body = await readBody(req, res);
      if (body === null) return; // answered 413
      const version = requestedVersion(req.headers['a2a-version'], url.searchParams.get('A2A-Version'));
      const parsed = await parser.parse(body);
      const quiet = isStreamingRequest(parsed) ? null : keepAlive(res);
      // A client that hangs up (a dropped stream, a blocking SendMessage given up) stops what follows the task for it.
      const gone = new AbortController();
      res.on('close', () => res.writableEnded || gone.abort());
      const ctx = { operate: node.operate, aid, push, signal: gone.signal, rpcUrl: `${origin}/a2a/v1/agents/${aid}/jsonrpc` };
      const reply = await answerRpc(ctx, parsed, version).finally(() => quiet?.stop());
      if ('json' in reply) return sendRpc(res, reply.json);
      return stream(res, reply.stream.id, reply.stream.events);
    }
    if (req.method !== 'GET') return send(res, 405, { error: 'the card takes GET' }, { allow: 'GET' });
    const answer = await localCard(node.operate, aid, `${origin}/a2a/v1/agents/${aid}/jsonrpc`);
    if (answer.status === 200) return send(res, 200, answer.card);
    const { status, ...error } = answer;
    return send(res, status, error);
  } catch (err) {
    send(res, 500, { error: (err as Error).message });
  }
}

/**
 * The body, or null once it is known to be over MAX_BODY (by its Content-Length, or as it comes): the 413 is
 * then written at once, the rest of the body read and dropped, and the response ended (the connection
 * closed) only when the body has ended, so a client still sending gets the answer rather than a reset.
 */
function readBody(req: IncomingMessage, res: ServerResponse): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    const tooLarge = () => {
      over = true;
      chunks.length = 0;
      const body = stringifyLossless({ error: `the request body is larger than ${MAX_BODY} bytes` })!;
      res.writeHead(413, { 'content-type': 'application/json', connection: 'close', 'content-length': Buffer.byteLength(body) });
      res.write(body);
      resolve(null);
    };
    if (Number(req.headers['content-length']) > MAX_BODY) tooLarge();
    req.on('data', (chunk: Buffer) => {
      if (over) return;
      size += chunk.length;
      if (size > MAX_BODY) tooLarge();
      else chunks.push(chunk);
    });
    req.on('end', () => (over ? res.end() : resolve(Buffer.concat(chunks, size))));
    req.on('error', reject);
    // A client gone before the end of its body: nothing to answer.
    req.on('close', () => (req.complete ? undefined : reject(new Error('the request ended before its body'))));
  });
}

/**
 * Clients give up on a quiet connection: undici (Node's fetch, which @a2a-js/sdk uses) waits 300 s for
 * the headers and 300 s between chunks of the body. A blocking SendMessage may wait far longer, and a
 * stream stays quiet as long as its task does, so a JSON-RPC answer not ready in HEARTBEAT_MS gets its
 * headers then and a space every HEARTBEAT_MS (JSON allows white space before the value), and a stream
 * an SSE comment line (which clients skip).
 */
export const HEARTBEAT_MS = 15_000;

function keepAlive(res: ServerResponse): { stop(): void } {
  const timer = setInterval(() => {
    if (!res.headersSent) res.writeHead(200, { 'content-type': 'application/json' });
    res.write(' ');
  }, HEARTBEAT_MS);
  return { stop: () => clearInterval(timer) };
}

/** A JSON-RPC answer: sent whole, or ended after the heartbeat's spaces. */
function sendRpc(res: ServerResponse, body: Record<string, unknown>): void {
  if (res.headersSent) res.end(stringifyLossless(body));
  else send(res, 200, body);
}

/**
 * An SSE answer (A2A §9.4.2): each event `data: {"jsonrpc":"2.0","id":…,"result":<StreamResponse>}`, the
 * response ended once the stream has. A failure mid-stream is one last event with an error. A client
 * that leaves stops the reading (the task goes on).
 */
async function stream(res: ServerResponse, id: Id, events: Channel<StreamResponse>): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  const iterator = events[Symbol.asyncIterator]();
  const leave = () => events.stop();
  res.on('close', leave);
  const event = (body: Record<string, unknown>) => writeUpdate(res, `data: ${stringifyLossless(body)}\n\n`);
  const timer = setInterval(() => writeUpdate(res, ': keep-alive\n\n'), HEARTBEAT_MS);
  try {
    for (let next = await iterator.next(); !next.done && !res.destroyed; next = await iterator.next()) {
      event({ jsonrpc: '2.0', id, result: next.value });
    }
  } catch (err) {
    if (!res.destroyed) event(failure(id, asRpcError(err)));
  } finally {
    clearInterval(timer);
    res.off('close', leave);
    res.end();
  }
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent) return;
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  // Lossless: an id the client wrote as a large number goes back exactly as written.
  res.end(stringifyLossless(body));
}
