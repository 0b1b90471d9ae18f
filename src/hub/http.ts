// The hub's HTTP plumbing: its error answer, who a request comes from, reading a body under a budget and
// deadlines, the JSON body and the request target. What a route means is elsewhere (src/hub/server.ts
// routes to src/hub/{directory,registration,ledger-routes,relay-routes}.ts).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isIP, isIPv4, isIPv6 } from 'node:net';
import type { Budget } from './budget.js';
import { LedgerRefused } from './ledger.js';
import type { Log } from '../util/log.js';

/** After an error answered before its body was read, the rest is read and dropped this long at most. */
const LINGER_MS = 1000;

export class HubError extends Error {
  /** `retryAfterS`: sent as Retry-After. `extra`: fields of the answer beside `error` (a blob's `received`). */
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly retryAfterS?: number,
    readonly extra?: Record<string, unknown>,
  ) {
    super(message);
  }
}

export function send(
  res: ServerResponse,
  status: number,
  body: unknown,
  type = 'application/json',
  headers: Record<string, string> = {},
): void {
  const data = typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body);
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store', ...headers });
  res.end(data);
}

/**
 * The JSON error of a request that failed. One answered before its body was read whole (too large, over
 * the budget, past its deadline, a bad route) closes its connection: what still comes is read and dropped
 * for LINGER_MS at most (closing on unread input could reset the connection before the answer is read).
 */
export function refuse(req: IncomingMessage, res: ServerResponse, err: unknown, log?: Log): void {
  const e = err instanceof HubError || err instanceof LedgerRefused ? err : new HubError(500, 'INTERNAL', (err as Error).message);
  // The hub's own failure, not a refusal: the operator needs its line (the AIDs in it are masked above debug).
  if (e.status === 500) log?.(`${req.method} ${req.url?.split('?')[0]}: ${e.code}: ${e.message}`, 'error');
  if (res.headersSent) return void res.destroy();
  const headers: Record<string, string> = {};
  if (e instanceof HubError && e.retryAfterS) headers['retry-after'] = String(e.retryAfterS);
  dropRest(req, headers);
  const extra = e instanceof HubError ? e.extra : undefined;
  send(res, e.status, { error: { code: e.code, message: e.message }, ...extra }, 'application/json', headers);
}

/**
 * Before answering a request whose body was not read whole: the answer closes the connection, and what
 * still comes is read and dropped for LINGER_MS at most (closing on unread input could reset the
 * connection before the answer is read).
 */
export function dropRest(req: IncomingMessage, headers: Record<string, string>): void {
  if (req.complete) return;
  headers.connection = 'close';
  req.removeAllListeners('data');
  req.resume();
  setTimeout(() => req.socket.destroy(), LINGER_MS).unref();
}

/**
 * Who a request comes from, for the per-client shares and the registration limit: its address (the last
 * `X-Forwarded-For` entry, the one the proxy added, with `trustProxy`), an IPv6 address by its /64 (one
 * host usually has a whole /64), an IPv4-mapped one as IPv4.
 */
export function clientOf(req: IncomingMessage, trustProxy: boolean): string {
  let address = req.socket.remoteAddress ?? '';
  if (trustProxy) {
    const forwarded = req.headers['x-forwarded-for'];
    const last = (Array.isArray(forwarded) ? forwarded.join(',') : (forwarded ?? '')).split(',').pop()?.trim();
    if (last && isIP(last)) address = last;
  }
  if (address.startsWith('::ffff:') && isIPv4(address.slice(7))) return address.slice(7);
  if (!isIPv6(address)) return address;
  const [left = '', right] = address.split('%')[0]!.split('::');
  const head = left ? left.split(':') : [];
  const tail = right ? right.split(':') : [];
  const width = (groups: string[]) => groups.reduce((n, g) => n + (g.includes('.') ? 2 : 1), 0);
  const groups = [...head, ...Array<string>(Math.max(0, 8 - width(head) - width(tail))).fill('0'), ...tail];
  return `${groups
    .slice(0, 4)
    .map((g) => parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}

/** How long a request body may take: see readBody(). */
export interface BodyDeadlines {
  bodyIdleMs: number;
  minBodyRate: number;
}

/**
 * The request body, at most `max` bytes (`413 TOO_LARGE`, at once when Content-Length says so), its
 * bytes taken from `budget` under `client`'s share as they arrive (`503 BUSY` when there is no room) and
 * given back when it is whole or dropped. A body that sends nothing for `bodyIdleMs`, or has not arrived
 * within `bodyIdleMs` + its length at `minBodyRate`, is dropped (`408 BODY_TIMEOUT`): a stalled body
 * holds its bytes a short while only. Read with plain events: a Readable's async iterator cost a relay
 * send more than its body.
 */
export function readBody(
  ctx: BodyDeadlines,
  req: IncomingMessage,
  client: string,
  max: number,
  budget: Budget,
  busy: string,
): Promise<Buffer> {
  const length = req.headers['content-length'];
  const declared = length === undefined ? null : Number(length);
  if (declared !== null && !(declared <= max)) return Promise.reject(new HubError(413, 'TOO_LARGE', `request body over ${max} bytes`));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (err: HubError | null) => {
      if (done) return;
      done = true;
      clearTimeout(idle);
      clearTimeout(deadline);
      budget.give(client, size);
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('close', onClose);
      if (err) reject(err);
      else resolve(Buffer.concat(chunks, size));
    };
    const onData = (chunk: Buffer) => {
      if (size + chunk.length > max) return finish(new HubError(413, 'TOO_LARGE', `request body over ${max} bytes`));
      if (!budget.take(client, chunk.length)) return finish(new HubError(503, 'BUSY', busy));
      size += chunk.length;
      chunks.push(chunk);
      idle.refresh();
    };
    const onEnd = () => finish(null);
    const onClose = () => {
      if (!req.complete) finish(new HubError(400, 'BAD_REQUEST', 'the request ended before its body'));
    };
    const allowed = ctx.bodyIdleMs + Math.ceil(((declared ?? max) / ctx.minBodyRate) * 1000);
    const idle = setTimeout(
      () => finish(new HubError(408, 'BODY_TIMEOUT', `no byte of the request body came for ${ctx.bodyIdleMs / 1000} s`)),
      ctx.bodyIdleMs,
    );
    const deadline = setTimeout(
      () =>
        finish(
          new HubError(
            408,
            'BODY_TIMEOUT',
            `the request body did not arrive within ${allowed / 1000} s (${ctx.minBodyRate} bytes a second at least)`,
          ),
        ),
      allowed,
    );
    idle.unref();
    deadline.unref();
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('close', onClose);
    req.on('error', () => finish(new HubError(400, 'BAD_REQUEST', 'the request ended before its body')));
  });
}

export function json(body: Buffer): Record<string, unknown> {
  try {
    const v = JSON.parse(body.toString('utf8'));
    if (v && typeof v === 'object' && !Array.isArray(v)) return v;
  } catch {
    /* fall through */
  }
  throw new HubError(400, 'BAD_REQUEST', 'the body must be a JSON object');
}

/** The request's URL: its target must be a path (`//host/…` or `*` would be read as something else). */
export function target(req: IncomingMessage): URL {
  const raw = req.url ?? '/';
  try {
    if (raw.startsWith('/') && !raw.startsWith('//')) return new URL(raw, 'http://hub');
  } catch {
    /* fall through */
  }
  throw new HubError(400, 'BAD_REQUEST', 'the request target must be a path that starts with a single /');
}
