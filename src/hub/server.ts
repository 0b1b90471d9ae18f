// `anet-hub start` (SPEC §11, directory, KEL store, relay, ledger): the hub's assembly and its routing
// table. Register, publish, withdraw, search, card, KEL, JWKS; mint, hold, settle, accounts; invites; the
// relay. Every card is verified on entry against the stored KEL; every write is signed by the node (a mint
// or an invite by the hub's own identity). Request bodies are counted as they arrive against budgets with
// a share per client and dropped when they stall; new AIDs are admitted by invite or within a per-client
// rate (PROTOCOL §8.1, §8.4). Each concern has its file: src/hub/http.ts (plumbing), auth.ts (signed
// requests), directory.ts, registration.ts, ledger-routes.ts, relay-routes.ts; the state they share for
// one hub is a HubContext (context.ts).
import { unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../util/fsutil.js';
import { createServer, type IncomingMessage, type ServerResponse, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { HubStorage } from './storage/types.js';
import { openStorage } from './storage/open.js';
import { DEFAULT_LIMITS, Relay, type RelayBus, type RelayLimits } from './relay.js';
import { Blobs, DEFAULT_BLOB_LIMITS } from './blobs.js';
import { handleBlobs } from './blob-routes.js';
import { Budget } from './budget.js';
import { Ledger } from './ledger.js';
import { hasIdentity, createIdentity, loadIdentity } from '../identity/store.js';
import type { HubContext } from './context.js';
import { HubError, send, refuse, clientOf, readBody, target } from './http.js';
import { RequestAuth } from './auth.js';
import { showAgent, search, publish, withdraw, updateKel, putKeys } from './directory.js';
import { register, mintInvite, RateLimit } from './registration.js';
import { handleLedger } from './ledger-routes.js';
import { handleRelay, upgrade } from './relay-routes.js';
import { isWebPath, serveWeb } from './web/serve.js';
import { HubMetrics } from './metrics.js';
import type { Log } from '../util/log.js';

export { HubError } from './http.js';

export interface HubOptions {
  /** The hub's identity and run file; its LevelDB too unless `db` names a PostgreSQL. */
  dataDir: string;
  /** A PostgreSQL URL: the storage shared by the hub's replicas (default: LevelDB in dataDir). */
  db?: string;
  /** A NATS URL: the bus on which replicas hand each other envelopes (needs `db`). */
  bus?: string;
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
  /** Bytes of blobs kept in all (default BLOB_TOTAL_BYTES, 16 GiB), shared by replicas. */
  blobBytes?: number;
  /** Bytes of blobs one client may have kept or in progress on this process (default BLOB_UPLOADER_BYTES, 1 GiB). */
  blobBytesPerUploader?: number;
  /** A blob upload that sends no byte for this long is dropped (default 30 s). */
  blobStallMs?: number;
  /** The hub's log (src/util/log.ts; `anet hub start` gives one that masks AIDs above debug): none by default. */
  log?: Log;
}

const BODY_IDLE_MS = 10_000;
const MIN_BODY_RATE = 64 * 1024;
const BODY_BYTES = 32 * 1024 * 1024;
const BODY_BYTES_PER_CLIENT = 8 * 1024 * 1024;
const REGISTRATIONS_PER_MINUTE = 20;

/** `<hub data>/hub.json`: `{url, pid}` while the hub runs. */
export const hubRunFile = (dataDir: string) => join(dataDir, 'hub.json');

/**
 * `<hub data>/hub-store.json`: `{kind: 'postgres', where}` once a hub ran on this data dir with `--db`, so
 * a command run while it is stopped (`anet hub mint`) says where its store is instead of opening an empty
 * LevelDB beside its identity. The URL is kept without its password.
 */
export const hubStoreFile = (dataDir: string) => join(dataDir, 'hub-store.json');

const MAX_BODY = 256 * 1024;

export interface Hub {
  url: string;
  aid: string;
  server: Server;
  storage: HubStorage;
  relay: Relay;
  blobs: Blobs;
  ledger: Ledger;
  /** Request bodies of the routes outside /relay/v2 being received (the relay's are `relay.uploads`). */
  bodies: Budget;
  /** Its Prometheus metrics, served at GET /metrics (src/hub/metrics.ts). */
  metrics: HubMetrics;
  close(): Promise<void>;
}

/** How often holds past their 24 h are released to their payers (each op also does it first). */
const SWEEP_EVERY_MS = 60_000;

export async function startHub(opts: HubOptions): Promise<Hub> {
  const now = opts.now ?? Date.now;
  if (!(await hasIdentity(opts.dataDir))) await createIdentity(opts.dataDir, now());
  const identity = await loadIdentity(opts.dataDir);
  const storage = await openStorage(opts.dataDir, opts.db);
  const ledger = new Ledger(storage, identity.aid, now);
  try {
    await storage.bind(identity.aid);
    // A damaged ledger history refuses the start (LedgerDamagedError: one line, what to do).
    await ledger.check();
  } catch (err) {
    await storage.close();
    throw err;
  }
  if (storage.kind === 'postgres')
    await writeFileAtomic(hubStoreFile(opts.dataDir), JSON.stringify({ kind: storage.kind, where: storage.where }), 0o600);
  const bus = await openBus(opts, identity.aid).catch(async (err) => {
    await storage.close();
    throw err;
  });
  const relay = new Relay(now, opts.limits, storage, bus);
  const blobs = new Blobs(storage.blobs, now, {
    ...DEFAULT_BLOB_LIMITS,
    totalBytes: opts.blobBytes ?? DEFAULT_BLOB_LIMITS.totalBytes,
    perUploader: opts.blobBytesPerUploader ?? DEFAULT_BLOB_LIMITS.perUploader,
    stallMs: opts.blobStallMs ?? DEFAULT_BLOB_LIMITS.stallMs,
    ttlMs: opts.limits?.ttlMs ?? DEFAULT_LIMITS.ttlMs,
  });
  relay.sweepAlso(() => blobs.sweep());
  const perMinute = opts.registrationsPerMinute ?? REGISTRATIONS_PER_MINUTE;
  const ctx: HubContext = {
    storage,
    relay,
    blobs,
    ledger,
    hubKel: identity.kel,
    now,
    bodyIdleMs: opts.bodyIdleMs ?? BODY_IDLE_MS,
    minBodyRate: opts.minBodyRate ?? MIN_BODY_RATE,
    trustProxy: opts.trustProxy ?? false,
    requireInvite: opts.requireInvite ?? false,
    bodies: new Budget(opts.bodyBytes ?? BODY_BYTES, opts.bodyBytesPerClient ?? BODY_BYTES_PER_CLIENT),
    registrations: perMinute > 0 ? new RateLimit(perMinute, now) : null,
    auth: new RequestAuth(storage.nonces, now),
    metrics: new HubMetrics(relay, storage.mailbox, storage.ledger),
    log: opts.log ?? (() => {}),
  };
  await ledger.sweep();
  const sweeper = setInterval(() => void ledger.sweep().catch(() => {}), SWEEP_EVERY_MS);
  sweeper.unref();
  // Requests being answered, per connection (see upgrade()).
  const answering = new WeakMap<Socket, number>();
  // No limit on a whole request's time (Node's default is 5 minutes): a blob upload may take longer, and is
  // dropped when it stalls; every other body has its own deadlines (readBody).
  const server = createServer({ requestTimeout: 0 }, (req, res) => {
    const socket = req.socket;
    answering.set(socket, (answering.get(socket) ?? 0) + 1);
    res.once('close', () => answering.set(socket, answering.get(socket)! - 1));
    handle(ctx, clientOf(req, ctx.trustProxy), req, res).catch((err) => refuse(req, res, err, ctx.log));
  });
  server.on('upgrade', (req, socket, head) =>
    upgrade(relay, (s) => (answering.get(s) ?? 0) > 0, clientOf(req, ctx.trustProxy), req, socket as Socket, head),
  );
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
    storage,
    relay,
    blobs,
    ledger,
    bodies: ctx.bodies,
    metrics: ctx.metrics,
    close: async () => {
      clearInterval(sweeper);
      await unlink(hubRunFile(opts.dataDir)).catch(() => {});
      // The relay closes its bus (replicas) and lets the mailbox writes under way finish.
      await relay.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await ledger.idle();
      await storage.close();
    },
  };
}

/**
 * The bus of a replica (`bus`: a NATS URL), loaded only when asked for. Replicas share one PostgreSQL:
 * a bus without `db` would join replicas that each keep their own mailboxes and ledger.
 */
async function openBus(opts: HubOptions, hubAid: string): Promise<RelayBus | undefined> {
  if (opts.bus === undefined) return undefined;
  if (opts.db === undefined) throw new Error('--bus needs --db: replicas share one PostgreSQL (`--db postgres://… --bus nats://…`)');
  const { NatsBus } = await import('./nats-bus.js');
  return NatsBus.connect(opts.bus, `anet-hub ${hubAid.slice(0, 16)} pid ${process.pid}`);
}

const BUSY_BODIES = 'the hub is receiving too many requests at once; retry shortly';

async function handle(ctx: HubContext, client: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const { storage, relay } = ctx;
  const hubAid = ctx.hubKel.aid;
  const url = target(req);
  const parts = url.pathname.split('/').filter(Boolean);
  const method = req.method ?? 'GET';
  if (url.pathname.startsWith('/relay/v2')) return handleRelay(ctx, client, req, res, url.pathname, method);
  if (parts[0] === 'blobs') return handleBlobs(ctx, client, req, res, parts, method);
  const body = await readBody(ctx, req, client, MAX_BODY, ctx.bodies, BUSY_BODIES);
  // The relay counts envelopes (never who sent them to whom): operators watch them, tests count them.
  if (method === 'GET' && url.pathname === '/health') return send(res, 200, { ok: true, aid: hubAid, relay: relay.stats });
  if (method === 'GET' && url.pathname === '/metrics') return ctx.metrics.answer(res);
  // The web view (issue 22): a page that verifies what it shows itself, served beside the API it reads.
  if (method === 'GET' && isWebPath(url.pathname)) return serveWeb(res, url.pathname);
  if (parts[0] === 'ledger') return send(res, 200, await handleLedger(ctx, req, url.pathname, method, body));
  if (parts[0] === 'invites' && parts.length === 1 && method === 'POST')
    return send(res, 200, await mintInvite(ctx, req, url.pathname, body));
  if (parts[0] !== 'agents') throw new HubError(404, 'NOT_FOUND', `no route ${method} ${url.pathname}`);
  if (parts.length === 1 && method === 'GET') return send(res, 200, await search(storage, url.searchParams));
  if (parts.length === 1 && method === 'POST') return send(res, 200, await register(ctx, client, req, url.pathname, body));
  const aid = parts[1]!;
  const what = parts[2];
  if (method === 'GET' && (await showAgent(storage, res, aid, what, ctx.metrics))) return;
  if (what === 'keys' && method === 'PUT') return send(res, 200, await putKeys(ctx, req, url.pathname, body, aid));
  if (what === 'card' && method === 'PUT') return send(res, 200, await publish(ctx, req, url.pathname, body, aid));
  if (what === 'card' && method === 'DELETE') return send(res, 200, await withdraw(ctx, req, url.pathname, body, aid));
  if (what === 'kel' && method === 'PUT') return send(res, 200, await updateKel(ctx, req, url.pathname, body, aid));
  throw new HubError(404, 'NOT_FOUND', `no route ${method} ${url.pathname}`);
}
