// `anet hub start` (SPEC §11, directory, KEL store, relay, ledger): register, publish, withdraw, search,
// card, KEL, JWKS; mint, hold, settle, accounts; invites. Every card is verified on entry against the
// stored KEL; every write is signed by the node (a mint or an invite by the hub's own identity). Request
// bodies are counted as they arrive against budgets with a share per client and dropped when they stall;
// new AIDs are admitted by invite or within a per-client rate (PROTOCOL §8.1, §8.4).
import { unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../util/fsutil.js';
import { createServer, STATUS_CODES, type IncomingMessage, type ServerResponse, type Server } from 'node:http';
import { isIP, isIPv4, isIPv6, type Socket } from 'node:net';
import { HubStore, isInviteToken, inviteKey, type AgentRecord, type Invite } from './store.js';
import { Relay, Budget, type RelayLimits } from './relay.js';
import { MAX_ENVELOPE, UPSTREAM_PROTOCOL } from '../protocol/relay.js';
import { Ledger, LedgerRefused } from './ledger.js';
import { verifyKeySet } from '../protocol/keyset.js';
import { authMessage, AUTH_WINDOW_MS } from '../protocol/hub-auth.js';
import { verifyCard } from '../protocol/card/verify.js';
import { validateKel, compareKel, KelError, type KelState } from '../identity/kel.js';
import { verify as verifyEd25519 } from '../identity/ed25519.js';
import { hasIdentity, createIdentity, loadIdentity } from '../identity/store.js';
import type { AgentCard } from '../protocol/card/types.js';

export interface HubOptions {
  dataDir: string;
  port: number;
  host?: string;
  now?: () => number;
  /** The relay's limits, DEFAULT_LIMITS where not given. */
  limits?: Partial<RelayLimits>;
  /** A request body that sends no byte for this long is dropped, `408 BODY_TIMEOUT` (default 10 s). */
  bodyIdleMs?: number;
  /** A body must arrive within bodyIdleMs + its length at this many bytes a second (default 64 KiB/s). */
  minBodyRate?: number;
  /** Bodies of the routes outside /relay/v2 being received at once, in all (32 MiB) and per client (8 MiB). */
  bodyBytes?: number;
  bodyBytesPerClient?: number;
  /**
   * The client is the last address of `X-Forwarded-For` (behind a reverse proxy, which sets it), else the
   * connection's. Without a proxy that sets it, anyone could pick their address this way.
   */
  trustProxy?: boolean;
  /** A new AID registers only with an invite (`anet hub invite`). */
  requireInvite?: boolean;
  /** New AIDs registered per client a minute without an invite (default 20; 0: no limit). */
  registrationsPerMinute?: number;
}

const BODY_IDLE_MS = 10_000;
const MIN_BODY_RATE = 64 * 1024;
const BODY_BYTES = 32 * 1024 * 1024;
const BODY_BYTES_PER_CLIENT = 8 * 1024 * 1024;
const REGISTRATIONS_PER_MINUTE = 20;
/** After an error answered before its body was read, the rest is read and dropped this long at most. */
const LINGER_MS = 1000;

/** `<hub data>/hub.json`: `{url, pid}` while the hub runs. */
export const hubRunFile = (dataDir: string) => join(dataDir, 'hub.json');

export class HubError extends Error {
  /** `retryAfterS`: sent as Retry-After. */
  constructor(readonly status: number, readonly code: string, message: string, readonly retryAfterS?: number) {
    super(message);
  }
}

const MAX_BODY = 256 * 1024;

export interface Hub {
  url: string;
  aid: string;
  server: Server;
  store: HubStore;
  relay: Relay;
  ledger: Ledger;
  /** Request bodies of the routes outside /relay/v2 being received (the relay's are `relay.uploads`). */
  bodies: Budget;
  close(): Promise<void>;
}

/** What the handlers share for one hub. */
interface Ctx {
  store: HubStore;
  relay: Relay;
  ledger: Ledger;
  hubKel: KelState;
  now: () => number;
  bodyIdleMs: number;
  minBodyRate: number;
  trustProxy: boolean;
  requireInvite: boolean;
  bodies: Budget;
  /** New AIDs per client; null when off. */
  registrations: RateLimit | null;
  /** `<aid>!<nonce>` of signed requests being checked now: a copy arriving meanwhile is REPLAYED at once. */
  nonces: Set<string>;
  lastPrune: number;
  /** Invites (their keys) being used now: of registrations racing with one token, one gets in. */
  claimed: Set<string>;
  /** AIDs with encryption keys published: the relay queues envelopes for these only. */
  recipients: Set<string>;
}

/** How often holds past their 24 h are released to their payers (each op also does it first). */
const SWEEP_EVERY_MS = 60_000;

export async function startHub(opts: HubOptions): Promise<Hub> {
  const now = opts.now ?? Date.now;
  if (!(await hasIdentity(opts.dataDir))) await createIdentity(opts.dataDir, now());
  const identity = await loadIdentity(opts.dataDir);
  const store = await HubStore.open(opts.dataDir);
  const recipients = new Set<string>();
  for await (const value of store.agents.values()) if ((value as AgentRecord).keys) recipients.add((value as AgentRecord).aid);
  const relay = new Relay(now, opts.limits, (aid) => recipients.has(aid));
  const ledger = new Ledger(store, identity.aid, now);
  // A damaged ledger history refuses the start (LedgerDamagedError: one line, what to do).
  await ledger.check().catch(async (err) => { await store.close(); throw err; });
  const perMinute = opts.registrationsPerMinute ?? REGISTRATIONS_PER_MINUTE;
  const ctx: Ctx = {
    store,
    relay,
    ledger,
    hubKel: identity.kel,
    now,
    bodyIdleMs: opts.bodyIdleMs ?? BODY_IDLE_MS,
    minBodyRate: opts.minBodyRate ?? MIN_BODY_RATE,
    trustProxy: opts.trustProxy ?? false,
    requireInvite: opts.requireInvite ?? false,
    bodies: new Budget(opts.bodyBytes ?? BODY_BYTES, opts.bodyBytesPerClient ?? BODY_BYTES_PER_CLIENT),
    registrations: perMinute > 0 ? new RateLimit(perMinute, now) : null,
    nonces: new Set(),
    lastPrune: 0,
    claimed: new Set(),
    recipients,
  };
  await ledger.sweep();
  const sweeper = setInterval(() => void ledger.sweep().catch(() => {}), SWEEP_EVERY_MS);
  sweeper.unref();
  // Requests being answered, per connection (see upgrade()).
  const answering = new WeakMap<Socket, number>();
  const server = createServer((req, res) => {
    const socket = req.socket;
    answering.set(socket, (answering.get(socket) ?? 0) + 1);
    res.once('close', () => answering.set(socket, answering.get(socket)! - 1));
    handle(ctx, clientOf(req, ctx.trustProxy), req, res).catch((err) => refuse(req, res, err));
  });
  server.on('upgrade', (req, socket, head) => upgrade(relay, (s) => (answering.get(s) ?? 0) > 0, clientOf(req, ctx.trustProxy), req, socket as Socket, head));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host ?? '127.0.0.1', () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : opts.port;
  const url = `http://${opts.host ?? '127.0.0.1'}:${port}`;
  // While it runs, `anet hub mint` on this data dir goes through the hub (which holds the store's lock).
  await writeFileAtomic(hubRunFile(opts.dataDir), JSON.stringify({ url, pid: process.pid }), 0o600);
  return {
    url,
    aid: identity.aid,
    server,
    store,
    relay,
    ledger,
    bodies: ctx.bodies,
    close: async () => {
      clearInterval(sweeper);
      await unlink(hubRunFile(opts.dataDir)).catch(() => {});
      relay.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await ledger.idle();
      await store.close();
    },
  };
}

function send(res: ServerResponse, status: number, body: unknown, type = 'application/json', headers: Record<string, string> = {}): void {
  const data = typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body);
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store', ...headers });
  res.end(data);
}

/**
 * The JSON error of a request that failed. One answered before its body was read whole (too large, over
 * the budget, past its deadline, a bad route) closes its connection: what still comes is read and dropped
 * for LINGER_MS at most (closing on unread input could reset the connection before the answer is read).
 */
function refuse(req: IncomingMessage, res: ServerResponse, err: unknown): void {
  const e = err instanceof HubError || err instanceof LedgerRefused ? err : new HubError(500, 'INTERNAL', (err as Error).message);
  if (res.headersSent) return void res.destroy();
  const headers: Record<string, string> = {};
  if (e instanceof HubError && e.retryAfterS) headers['retry-after'] = String(e.retryAfterS);
  if (!req.complete) {
    headers.connection = 'close';
    req.removeAllListeners('data');
    req.resume();
    setTimeout(() => req.socket.destroy(), LINGER_MS).unref();
  }
  send(res, e.status, { error: { code: e.code, message: e.message } }, 'application/json', headers);
}

/**
 * Who a request comes from, for the per-client shares and the registration limit: its address (the last
 * `X-Forwarded-For` entry, the one the proxy added, with `trustProxy`), an IPv6 address by its /64 (one
 * host usually has a whole /64), an IPv4-mapped one as IPv4.
 */
function clientOf(req: IncomingMessage, trustProxy: boolean): string {
  let address = req.socket.remoteAddress ?? '';
  if (trustProxy) {
    const forwarded = req.headers['x-forwarded-for'];
    const last = (Array.isArray(forwarded) ? forwarded.join(',') : forwarded ?? '').split(',').pop()?.trim();
    if (last && isIP(last)) address = last;
  }
  if (address.startsWith('::ffff:') && isIPv4(address.slice(7))) return address.slice(7);
  if (!isIPv6(address)) return address;
  const [left = '', right] = address.split('%')[0]!.split('::');
  const head = left ? left.split(':') : [];
  const tail = right ? right.split(':') : [];
  const width = (groups: string[]) => groups.reduce((n, g) => n + (g.includes('.') ? 2 : 1), 0);
  const groups = [...head, ...Array<string>(Math.max(0, 8 - width(head) - width(tail))).fill('0'), ...tail];
  return `${groups.slice(0, 4).map((g) => parseInt(g, 16).toString(16)).join(':')}::/64`;
}

/** A token bucket per client: `perMinute` at most, refilled evenly over the minute. */
class RateLimit {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(private readonly perMinute: number, private readonly now: () => number) {}

  /** Takes one for `client`: 0, or the seconds until one is back. */
  take(client: string): number {
    const now = this.now();
    if (this.buckets.size > 10_000) for (const [k, b] of this.buckets) if (this.level(b, now) >= this.perMinute) this.buckets.delete(k);
    const b = this.buckets.get(client);
    const tokens = b ? this.level(b, now) : this.perMinute;
    if (tokens < 1) {
      this.buckets.set(client, { tokens, at: now });
      return Math.max(1, Math.ceil(((1 - tokens) * 60) / this.perMinute));
    }
    this.buckets.set(client, { tokens: tokens - 1, at: now });
    return 0;
  }

  private level(b: { tokens: number; at: number }, now: number): number {
    return Math.min(this.perMinute, b.tokens + (Math.max(0, now - b.at) * this.perMinute) / 60_000);
  }
}

/**
 * `GET /relay/v2/upstream` with `Upgrade: anet-relay-upstream` (see UPSTREAM_PROTOCOL); any other upgrade
 * is refused (Node hands every request that asks for one here, curl --http2 asking for h2c included). An
 * upgrade pipelined behind a request still being answered would mix that answer into the new protocol:
 * its connection is closed.
 */
function upgrade(relay: Relay, answering: (socket: Socket) => boolean, client: string, req: IncomingMessage, socket: Socket, head: Buffer): void {
  socket.on('error', () => socket.destroy());
  try {
    if (answering(socket)) return void socket.destroy();
    if (req.method !== 'GET' || req.url !== '/relay/v2/upstream' || req.headers.upgrade?.toLowerCase() !== UPSTREAM_PROTOCOL) {
      return refuseUpgrade(socket, 400, 'BAD_UPGRADE', `this hub upgrades only GET /relay/v2/upstream, to ${UPSTREAM_PROTOCOL}`);
    }
    if (!relay.upstreamRoom()) return refuseUpgrade(socket, 503, 'BUSY', 'the hub has too many upstreams open; POST to /relay/v2/send');
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: ${UPSTREAM_PROTOCOL}\r\nConnection: Upgrade\r\n\r\n`);
    relay.upstream(socket, head, client);
  } catch {
    socket.destroy();
  }
}

/** One JSON error, then the connection closes (an upgraded socket has nothing else to close it). */
function refuseUpgrade(socket: Socket, status: number, code: string, message: string): void {
  const body = JSON.stringify({ error: { code, message } });
  socket.once('finish', () => socket.destroy());
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}

const BUSY_RELAY = 'the hub is receiving too many messages at once; retry shortly';
const BUSY_BODIES = 'the hub is receiving too many requests at once; retry shortly';

/**
 * The request body, at most `max` bytes (`413 TOO_LARGE`, at once when Content-Length says so), its
 * bytes taken from `budget` under `client`'s share as they arrive (`503 BUSY` when there is no room) and
 * given back when it is whole or dropped. A body that sends nothing for `bodyIdleMs`, or has not arrived
 * within `bodyIdleMs` + its length at `minBodyRate`, is dropped (`408 BODY_TIMEOUT`): a stalled body
 * holds its bytes a short while only. Read with plain events: a Readable's async iterator cost a relay
 * send more than its body.
 */
function readBody(ctx: Ctx, req: IncomingMessage, client: string, max: number, budget: Budget, busy: string): Promise<Buffer> {
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
    const idle = setTimeout(() => finish(new HubError(408, 'BODY_TIMEOUT', `no byte of the request body came for ${ctx.bodyIdleMs / 1000} s`)), ctx.bodyIdleMs);
    const deadline = setTimeout(
      () => finish(new HubError(408, 'BODY_TIMEOUT', `the request body did not arrive within ${allowed / 1000} s (${ctx.minBodyRate} bytes a second at least)`)),
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

function json(body: Buffer): Record<string, unknown> {
  try {
    const v = JSON.parse(body.toString('utf8'));
    if (v && typeof v === 'object' && !Array.isArray(v)) return v;
  } catch {
    /* fall through */
  }
  throw new HubError(400, 'BAD_REQUEST', 'the body must be a JSON object');
}

/** The request's URL: its target must be a path (`//host/…` or `*` would be read as something else). */
function target(req: IncomingMessage): URL {
  const raw = req.url ?? '/';
  try {
    if (raw.startsWith('/') && !raw.startsWith('//')) return new URL(raw, 'http://hub');
  } catch {
    /* fall through */
  }
  throw new HubError(400, 'BAD_REQUEST', 'the request target must be a path that starts with a single /');
}

async function handle(ctx: Ctx, client: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { store, relay } = ctx;
  const hubAid = ctx.hubKel.aid;
  const url = target(req);
  const parts = url.pathname.split('/').filter(Boolean);
  const method = req.method ?? 'GET';
  if (url.pathname.startsWith('/relay/v2')) return handleRelay(ctx, client, req, res, url.pathname, method);
  const body = await readBody(ctx, req, client, MAX_BODY, ctx.bodies, BUSY_BODIES);
  // The relay counts envelopes (never who sent them to whom): operators watch them, tests count them.
  if (method === 'GET' && url.pathname === '/health') return send(res, 200, { ok: true, aid: hubAid, relay: relay.stats });
  if (parts[0] === 'ledger') return send(res, 200, await handleLedger(ctx, req, url.pathname, method, body));
  if (parts[0] === 'invites' && parts.length === 1 && method === 'POST') return send(res, 200, await mintInvite(ctx, req, url.pathname, body));
  if (parts[0] !== 'agents') throw new HubError(404, 'NOT_FOUND', `no route ${method} ${url.pathname}`);
  if (parts.length === 1 && method === 'GET') return send(res, 200, await search(store, url.searchParams));
  if (parts.length === 1 && method === 'POST') return send(res, 200, await register(ctx, client, req, url.pathname, body));
  const aid = parts[1]!;
  const what = parts[2];
  if (method === 'GET') {
    const rec = await store.agent(aid);
    if (!rec) throw new HubError(404, 'UNKNOWN_AID', `no agent ${aid} on this hub`);
    if (what === 'card') {
      if (!rec.card) throw new HubError(404, 'NO_CARD', `${aid} has withdrawn its card`);
      return send(res, 200, rec.card);
    }
    if (what === 'kel') return send(res, 200, Buffer.from(rec.kel), 'application/cbor');
    if (what === 'jwks.json') return send(res, 200, jwks(rec));
    if (what === 'keys') {
      if (!rec.keys) throw new HubError(404, 'NO_KEYS', `${aid} has published no encryption keys`);
      return send(res, 200, Buffer.from(rec.keys), 'application/cbor');
    }
  }
  if (what === 'keys' && method === 'PUT') return send(res, 200, await putKeys(ctx, req, url.pathname, body, aid));
  if (what === 'card' && method === 'PUT') return send(res, 200, await publish(ctx, req, url.pathname, body, aid));
  if (what === 'card' && method === 'DELETE') return send(res, 200, await withdraw(ctx, req, url.pathname, body, aid));
  if (what === 'kel' && method === 'PUT') return send(res, 200, await updateKel(ctx, req, url.pathname, body, aid));
  throw new HubError(404, 'NOT_FOUND', `no route ${method} ${url.pathname}`);
}

/** POST /relay/v2/send (anonymous: an envelope names only its recipient); GET /relay/v2/stream (signed). */
async function handleRelay(ctx: Ctx, client: string, req: IncomingMessage, res: ServerResponse, path: string, method: string): Promise<void> {
  if (method === 'POST' && path === '/relay/v2/send') {
    const body = await readBody(ctx, req, client, MAX_ENVELOPE, ctx.relay.uploads, BUSY_RELAY);
    const answer = ctx.relay.answer(new Uint8Array(body.buffer, body.byteOffset, body.length), client);
    if ('error' in answer) throw new HubError(answer.error.status, answer.error.code, answer.error.message);
    return send(res, 202, answer);
  }
  if (method === 'GET' && path === '/relay/v2/stream') {
    const rec = await known(ctx.store, header(req, 'x-anet-aid'));
    await authenticate(ctx, req, path, Buffer.alloc(0), validateKel(rec.kel));
    return ctx.relay.attach(rec.aid, req, res);
  }
  throw new HubError(404, 'NOT_FOUND', `no route ${method} ${path}`);
}

/**
 * The ledger (SPEC §10, §11): POST /ledger/mint (the hub's own identity), /ledger/hold and /ledger/settle
 * (the payee), GET /ledger/accounts/<aid> (that AID or the hub). All signed; the ledger decides the rest.
 */
async function handleLedger(ctx: Ctx, req: IncomingMessage, path: string, method: string, raw: Buffer) {
  const { store, ledger, hubKel } = ctx;
  const parts = path.split('/').filter(Boolean);
  const route = method === 'GET' && parts.length === 3 && parts[1] === 'accounts' ? 'account' : method === 'POST' && parts.length === 2 ? parts[1] : undefined;
  if (route !== 'account' && route !== 'mint' && route !== 'hold' && route !== 'settle') throw new HubError(404, 'NOT_FOUND', `no route ${method} ${path}`);
  // The hub is no agent of its own directory: its requests are checked against the KEL it loaded.
  const signer = header(req, 'x-anet-aid');
  const kel = signer === hubKel.aid ? hubKel : validateKel((await known(store, signer)).kel);
  await authenticate(ctx, req, path, raw, kel);
  if (route === 'account') {
    const aid = parts[2]!;
    if (signer !== aid && signer !== hubKel.aid) throw new HubError(403, 'FORBIDDEN', 'an account is shown to its own AID and to the hub only');
    return ledger.account(aid);
  }
  const body = json(raw);
  if (route === 'mint') {
    if (signer !== hubKel.aid) throw new HubError(403, 'NOT_HUB', "only the hub's operator mints (`anet hub mint`)");
    return ledger.mint(body.aid as string, body.amount as string, body.nonce as string);
  }
  if (route === 'hold') {
    if (typeof body.authorization !== 'string') throw new HubError(400, 'BAD_AUTHORIZATION', 'authorization must be the signed authorization, base64');
    return ledger.hold(signer, new Uint8Array(Buffer.from(body.authorization, 'base64')));
  }
  return ledger.settle(signer, body.hold as string, body.action as 'capture' | 'release', body.nonce as string);
}

/** POST /invites, signed by the hub's own identity (`anet hub invite`): a new single-use invite token. */
async function mintInvite(ctx: Ctx, req: IncomingMessage, path: string, raw: Buffer) {
  if (header(req, 'x-anet-aid') !== ctx.hubKel.aid) throw new HubError(403, 'NOT_HUB', "only the hub's operator makes invites (`anet hub invite`)");
  await authenticate(ctx, req, path, raw, ctx.hubKel);
  return { token: await ctx.store.mintInvite(ctx.now()) };
}

function header(req: IncomingMessage, name: string): string {
  const v = req.headers[name];
  if (typeof v !== 'string' || v.length === 0) throw new HubError(401, 'UNAUTHENTICATED', `missing ${name}`);
  return v;
}

/** Checks the request signature against `kel`'s current key, the clock window, and nonce reuse. */
async function authenticate(ctx: Ctx, req: IncomingMessage, path: string, body: Buffer, kel: KelState): Promise<void> {
  const aid = header(req, 'x-anet-aid');
  const time = header(req, 'x-anet-time');
  const nonce = header(req, 'x-anet-nonce');
  const sig = Buffer.from(header(req, 'x-anet-signature'), 'base64url');
  if (aid !== kel.aid) throw new HubError(401, 'UNAUTHENTICATED', 'x-anet-aid is not this agent');
  const t = Number(time);
  if (!/^[0-9]{1,16}$/.test(time) || Math.abs(ctx.now() - t) > AUTH_WINDOW_MS) {
    throw new HubError(401, 'CLOCK_SKEW', `request time is more than ${AUTH_WINDOW_MS / 1000} s from the hub's clock`);
  }
  if (!/^[0-9a-f]{32}$/.test(nonce)) throw new HubError(401, 'UNAUTHENTICATED', 'x-anet-nonce must be 16 random bytes in hex');
  if (!verifyEd25519(kel.currentKey, authMessage(req.method ?? '', path, time, nonce, body), sig)) {
    throw new HubError(401, 'UNAUTHENTICATED', 'the request is not signed by the agent\'s current key');
  }
  // Checked and claimed before any await: of copies of one request arriving together, one gets past; the
  // claim lasts until the nonce is on disk, where later copies find it.
  const key = `${aid}!${nonce}`;
  const replayed = () => new HubError(401, 'REPLAYED', 'this request was already received');
  if (ctx.nonces.has(key)) throw replayed();
  ctx.nonces.add(key);
  try {
    if ((await ctx.store.nonces.get(key)) !== undefined) throw replayed();
    await ctx.store.nonces.put(key, t);
  } finally {
    ctx.nonces.delete(key);
  }
  await pruneNonces(ctx, ctx.now());
}

async function pruneNonces(ctx: Ctx, at: number): Promise<void> {
  if (at - ctx.lastPrune < AUTH_WINDOW_MS) return;
  ctx.lastPrune = at;
  const old: string[] = [];
  for await (const [k, t] of ctx.store.nonces.iterator()) if ((t as number) < at - 2 * AUTH_WINDOW_MS) old.push(k);
  if (old.length) await ctx.store.nonces.batch(old.map((key) => ({ type: 'del' as const, key })));
}

function kelFrom(body: Record<string, unknown>): { kel: KelState; bytes: Uint8Array } {
  if (typeof body.kel !== 'string') throw new HubError(400, 'BAD_REQUEST', 'kel must be base64 CoreDet CBOR');
  const bytes = new Uint8Array(Buffer.from(body.kel, 'base64'));
  try {
    return { kel: validateKel(bytes), bytes };
  } catch (err) {
    if (err instanceof KelError) throw new HubError(400, `KEL_${err.code}`, err.message);
    throw err;
  }
}

function checkCard(wire: unknown, kel: KelState, rec: AgentRecord | undefined, now: number): { seq: string; digest: string; card: AgentCard } {
  if (typeof wire !== 'string') throw new HubError(400, 'BAD_REQUEST', 'card must be the signed card JSON, as a string');
  const highWater = rec?.seq ? { seq: BigInt(rec.seq), digest: rec.digest! } : null;
  const r = verifyCard(wire, { kel, now, highWater });
  if (!r.ok) throw new HubError(r.code === 'SEQ_ROLLBACK' || r.code === 'SEQ_FORK' ? 409 : 400, r.code, r.detail);
  return { seq: r.seq.toString(), digest: r.digest, card: r.card };
}

/**
 * Register (or re-register): the KEL must equal or extend the stored one; a card is optional. A new AID is
 * admitted by an invite when the body carries one, else only when the hub asks for none, and then within
 * the per-client limit of new AIDs a minute.
 */
async function register(ctx: Ctx, client: string, req: IncomingMessage, path: string, raw: Buffer) {
  const { store, now } = ctx;
  const body = json(raw);
  const { kel, bytes } = kelFrom(body);
  const rec = await store.agent(kel.aid);
  if (rec) acceptKel(validateKel(rec.kel), kel);
  await authenticate(ctx, req, path, raw, kel);
  const name = typeof body.name === 'string' && body.name.length > 0 ? body.name.slice(0, 128) : rec?.name ?? '';
  const next: AgentRecord = {
    aid: kel.aid,
    name,
    kel: bytes,
    card: rec?.card ?? null,
    seq: rec?.seq ?? null,
    digest: rec?.digest ?? null,
    // A re-registration (a new name, a new card) keeps the node's encryption keys: without them no peer
    // could reach it until its daemon restarted.
    ...(rec?.keys ? { keys: rec.keys } : {}),
    updatedAt: now(),
  };
  if (body.card !== undefined && body.card !== null && !(rec?.card === body.card)) {
    const c = checkCard(body.card, kel, rec, now());
    Object.assign(next, { card: body.card, seq: c.seq, digest: c.digest });
  }
  if (rec) await store.agents.put(kel.aid, next);
  else await admit(ctx, client, body.invite, next);
  return { aid: kel.aid, seq: next.seq };
}

/** Writes the record of a new AID, if it is admitted (see register()). */
async function admit(ctx: Ctx, client: string, invite: unknown, next: AgentRecord): Promise<void> {
  const { store } = ctx;
  if (invite !== undefined && invite !== null) {
    if (!isInviteToken(invite)) throw new HubError(403, 'BAD_INVITE', 'an invite is the 32 hex characters `anet hub invite` printed');
    const key = inviteKey(invite);
    const used = () => new HubError(403, 'BAD_INVITE', 'this invite was already used: each registers one new AID');
    // Claimed before any await, as nonces are: one token, one new AID, however many race for it.
    if (ctx.claimed.has(key)) throw used();
    ctx.claimed.add(key);
    try {
      const found = (await store.invites.get(key)) as Invite | undefined;
      if (!found) throw new HubError(403, 'BAD_INVITE', 'this hub made no such invite');
      if (found.usedBy !== null) throw used();
      const spent: Invite = { ...found, usedBy: next.aid, usedAt: ctx.now() };
      await store.db.batch(
        [
          { type: 'put', sublevel: store.agents, key: next.aid, value: next },
          { type: 'put', sublevel: store.invites, key, value: spent },
        ] as never,
        { sync: true },
      );
    } finally {
      ctx.claimed.delete(key);
    }
    return;
  }
  if (ctx.requireInvite) {
    throw new HubError(403, 'INVITE_REQUIRED', 'this hub admits new AIDs by invitation only: ask its operator for an invite (`anet hub invite`), then register with `anet hub-register --name NAME --invite TOKEN`');
  }
  const wait = ctx.registrations?.take(client) ?? 0;
  if (wait > 0) throw new HubError(429, 'RATE_LIMITED', `too many new AIDs registered from this address; retry in ${wait} s`, wait);
  await store.agents.put(next.aid, next);
}

function acceptKel(known: KelState, incoming: KelState): void {
  const cmp = compareKel(known, incoming);
  if (cmp.kind === 'shorter') throw new HubError(409, 'KEL_ROLLBACK', 'the hub holds a longer KEL for this AID');
  if (cmp.kind === 'duplicity') throw new HubError(409, 'KEL_DUPLICITY', `a different event at seq ${cmp.seq}`);
  if (cmp.kind === 'other_aid') throw new HubError(400, 'KEL_WRONG_AID', 'the KEL is another AID\'s');
}

async function known(store: HubStore, aid: string): Promise<AgentRecord> {
  const rec = await store.agent(aid);
  if (!rec) throw new HubError(404, 'UNKNOWN_AID', `no agent ${aid} on this hub: register first`);
  return rec;
}

async function publish(ctx: Ctx, req: IncomingMessage, path: string, raw: Buffer, aid: string) {
  const { store, now } = ctx;
  const rec = await known(store, aid);
  const kel = validateKel(rec.kel);
  await authenticate(ctx, req, path, raw, kel);
  const body = json(raw);
  if (rec.card === body.card) return { aid, seq: rec.seq };
  const c = checkCard(body.card, kel, rec, now());
  await store.agents.put(aid, { ...rec, card: body.card as string, seq: c.seq, digest: c.digest, updatedAt: now() });
  return { aid, seq: c.seq };
}

async function withdraw(ctx: Ctx, req: IncomingMessage, path: string, raw: Buffer, aid: string) {
  const rec = await known(ctx.store, aid);
  await authenticate(ctx, req, path, raw, validateKel(rec.kel));
  // The high-water mark stays, so an older card cannot come back after a withdrawal.
  await ctx.store.agents.put(aid, { ...rec, card: null, updatedAt: ctx.now() });
  return { aid, withdrawn: true };
}

async function updateKel(ctx: Ctx, req: IncomingMessage, path: string, raw: Buffer, aid: string) {
  const rec = await known(ctx.store, aid);
  const { kel, bytes } = kelFrom(json(raw));
  if (kel.aid !== aid) throw new HubError(400, 'KEL_WRONG_AID', 'the KEL is another AID\'s');
  acceptKel(validateKel(rec.kel), kel);
  // After a rotation the node signs with its new key, which only the new KEL names.
  await authenticate(ctx, req, path, raw, kel);
  await ctx.store.agents.put(aid, { ...rec, kel: bytes, updatedAt: ctx.now() });
  return { aid, ksn: kel.ksn };
}

async function putKeys(ctx: Ctx, req: IncomingMessage, path: string, raw: Buffer, aid: string) {
  const rec = await known(ctx.store, aid);
  const kel = validateKel(rec.kel);
  await authenticate(ctx, req, path, raw, kel);
  try {
    verifyKeySet(new Uint8Array(raw), kel, ctx.now());
  } catch (err) {
    throw new HubError(400, 'BAD_KEY_SET', (err as Error).message);
  }
  await ctx.store.agents.put(aid, { ...rec, keys: new Uint8Array(raw), updatedAt: ctx.now() });
  // From now on the relay queues envelopes for it while it is offline.
  ctx.recipients.add(aid);
  return { aid };
}

function jwks(rec: AgentRecord) {
  const kel = validateKel(rec.kel);
  return { keys: [{ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA', kid: `did:anet:${rec.aid}#${kel.ksn}`, x: Buffer.from(kel.currentKey).toString('base64url') }] };
}

const words = (text: string) => text.toLowerCase().split(/\s+/).filter(Boolean);

function haystack(rec: AgentRecord, card: AgentCard): string {
  return [rec.name, card.name, card.description, ...card.skills.flatMap((s) => [s.id, s.name, s.description, ...s.tags])].join(' ').toLowerCase();
}

/** Search by words (all must match), skill id and tag; AID order, cursor = the last AID of a page. */
async function search(store: HubStore, params: URLSearchParams) {
  const q = words(params.get('q') ?? '');
  const skill = params.get('skill');
  const tag = params.get('tag');
  const limit = Math.min(Math.max(Number(params.get('limit') ?? 20) || 20, 1), 100);
  const cursor = params.get('cursor');
  const agents: { aid: string; name: string; card: string; kel: string; updatedAt: number }[] = [];
  let next: string | null = null;
  for await (const value of store.agents.values(cursor ? { gt: cursor } : {})) {
    const rec = value as AgentRecord;
    if (!rec.card) continue;
    let card: AgentCard;
    try {
      card = JSON.parse(rec.card);
    } catch {
      continue;
    }
    const text = haystack(rec, card);
    if (!q.every((w) => text.includes(w))) continue;
    if (skill && !card.skills.some((s) => s.id === skill)) continue;
    if (tag && !card.skills.some((s) => s.tags.includes(tag))) continue;
    if (agents.length === limit) {
      next = agents[agents.length - 1]!.aid;
      break;
    }
    agents.push({ aid: rec.aid, name: rec.name, card: rec.card, kel: Buffer.from(rec.kel).toString('base64'), updatedAt: rec.updatedAt });
  }
  return { agents, next };
}

