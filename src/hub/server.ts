// `anet hub start` (SPEC §11, directory, KEL store, relay, ledger): register, publish, withdraw, search,
// card, KEL, JWKS; mint, hold, settle, accounts. Every card is verified on entry against the stored KEL;
// every write is signed by the node (a mint by the hub's own identity).
import { unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../fsutil.js';
import { createServer, STATUS_CODES, type IncomingMessage, type ServerResponse, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { HubStore, type AgentRecord } from './store.js';
import { Relay, MAX_ENVELOPE, UPSTREAM_PROTOCOL } from './relay.js';
import { Ledger, LedgerRefused } from './ledger.js';
import { verifyKeySet } from '../relay/keyset.js';
import { authMessage, AUTH_WINDOW_MS } from './auth.js';
import { verifyCard } from '../card/verify.js';
import { validateKel, compareKel, KelError, type KelState } from '../identity/kel.js';
import { verify as verifyEd25519 } from '../identity/ed25519.js';
import { hasIdentity, createIdentity, loadIdentity } from '../identity/store.js';
import type { AgentCard } from '../card/types.js';

export interface HubOptions {
  dataDir: string;
  port: number;
  host?: string;
  now?: () => number;
}

/** `<hub data>/hub.json`: `{url, pid}` while the hub runs. */
export const hubRunFile = (dataDir: string) => join(dataDir, 'hub.json');

export class HubError extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
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
  close(): Promise<void>;
}

/** How often holds past their 24 h are released to their payers (each op also does it first). */
const SWEEP_EVERY_MS = 60_000;

export async function startHub(opts: HubOptions): Promise<Hub> {
  const now = opts.now ?? Date.now;
  if (!(await hasIdentity(opts.dataDir))) await createIdentity(opts.dataDir, now());
  const identity = await loadIdentity(opts.dataDir);
  const store = await HubStore.open(opts.dataDir);
  const relay = new Relay(now);
  const ledger = new Ledger(store, identity.aid, now);
  await ledger.sweep();
  const sweeper = setInterval(() => void ledger.sweep().catch(() => {}), SWEEP_EVERY_MS);
  sweeper.unref();
  // Requests being answered, per connection (see upgrade()).
  const answering = new WeakMap<Socket, number>();
  const server = createServer((req, res) => {
    const socket = req.socket;
    answering.set(socket, (answering.get(socket) ?? 0) + 1);
    res.once('close', () => answering.set(socket, answering.get(socket)! - 1));
    handle(store, relay, ledger, identity.kel, now, req, res).catch((err) => {
      const e = err instanceof HubError || err instanceof LedgerRefused ? err : new HubError(500, 'INTERNAL', (err as Error).message);
      send(res, e.status, { error: { code: e.code, message: e.message } });
    });
  });
  server.on('upgrade', (req, socket, head) => upgrade(relay, (s) => (answering.get(s) ?? 0) > 0, req, socket as Socket, head));
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

function send(res: ServerResponse, status: number, body: unknown, type = 'application/json'): void {
  const data = typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body);
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
  res.end(data);
}

/**
 * `GET /relay/v2/upstream` with `Upgrade: anet-relay-upstream` (see UPSTREAM_PROTOCOL); any other upgrade
 * is refused (Node hands every request that asks for one here, curl --http2 asking for h2c included). An
 * upgrade pipelined behind a request still being answered would mix that answer into the new protocol:
 * its connection is closed.
 */
function upgrade(relay: Relay, answering: (socket: Socket) => boolean, req: IncomingMessage, socket: Socket, head: Buffer): void {
  socket.on('error', () => socket.destroy());
  try {
    if (answering(socket)) return void socket.destroy();
    if (req.method !== 'GET' || req.url !== '/relay/v2/upstream' || req.headers.upgrade?.toLowerCase() !== UPSTREAM_PROTOCOL) {
      return refuseUpgrade(socket, 400, 'BAD_UPGRADE', `this hub upgrades only GET /relay/v2/upstream, to ${UPSTREAM_PROTOCOL}`);
    }
    if (!relay.upstreamRoom()) return refuseUpgrade(socket, 503, 'BUSY', 'the hub has too many upstreams open; POST to /relay/v2/send');
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: ${UPSTREAM_PROTOCOL}\r\nConnection: Upgrade\r\n\r\n`);
    relay.upstream(socket, head);
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

/**
 * The request body, refused past `max` bytes (the request is dropped, as a for-await loop leaving early
 * drops it). Read with plain events: a Readable's async iterator cost a relay send more than its body.
 */
function readBody(req: IncomingMessage, max = MAX_BODY): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) {
        req.destroy();
        reject(new HubError(413, 'TOO_LARGE', `request body over ${max} bytes`));
      } else chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
    req.on('close', () => {
      if (!req.complete) reject(new HubError(400, 'BAD_REQUEST', 'the request ended before its body'));
    });
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

async function handle(store: HubStore, relay: Relay, ledger: Ledger, hubKel: KelState, now: () => number, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const hubAid = hubKel.aid;
  const url = new URL(req.url ?? '/', 'http://hub');
  const parts = url.pathname.split('/').filter(Boolean);
  const method = req.method ?? 'GET';
  if (url.pathname.startsWith('/relay/v2')) return handleRelay(store, relay, now, req, res, url.pathname, method);
  const body = await readBody(req);
  // The relay counts envelopes (never who sent them to whom): operators watch them, tests count them.
  if (method === 'GET' && url.pathname === '/health') return send(res, 200, { ok: true, aid: hubAid, relay: relay.stats });
  if (parts[0] === 'ledger') return send(res, 200, await handleLedger(store, ledger, hubKel, now, req, url.pathname, method, body));
  if (parts[0] !== 'agents') throw new HubError(404, 'NOT_FOUND', `no route ${method} ${url.pathname}`);
  if (parts.length === 1 && method === 'GET') return send(res, 200, await search(store, url.searchParams));
  if (parts.length === 1 && method === 'POST') return send(res, 200, await register(store, now, req, url.pathname, body));
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
  if (what === 'keys' && method === 'PUT') return send(res, 200, await putKeys(store, now, req, url.pathname, body, aid));
  if (what === 'card' && method === 'PUT') return send(res, 200, await publish(store, now, req, url.pathname, body, aid));
  if (what === 'card' && method === 'DELETE') return send(res, 200, await withdraw(store, now, req, url.pathname, body, aid));
  if (what === 'kel' && method === 'PUT') return send(res, 200, await updateKel(store, now, req, url.pathname, body, aid));
  throw new HubError(404, 'NOT_FOUND', `no route ${method} ${url.pathname}`);
}

/** POST /relay/v2/send (anonymous: an envelope names only its recipient); GET /relay/v2/stream (signed). */
async function handleRelay(store: HubStore, relay: Relay, now: () => number, req: IncomingMessage, res: ServerResponse, path: string, method: string): Promise<void> {
  if (method === 'POST' && path === '/relay/v2/send') {
    const declared = Number(req.headers['content-length'] ?? MAX_ENVELOPE);
    if (!(declared <= MAX_ENVELOPE)) throw new HubError(413, 'TOO_LARGE', `request body over ${MAX_ENVELOPE} bytes`);
    if (!relay.startUpload(declared)) throw new HubError(503, 'BUSY', 'the hub is receiving too many messages at once; retry shortly');
    let body: Buffer;
    try {
      body = await readBody(req, declared);
    } finally {
      relay.endUpload(declared);
    }
    const answer = relay.answer(new Uint8Array(body.buffer, body.byteOffset, body.length));
    if ('error' in answer) throw new HubError(answer.error.status, answer.error.code, answer.error.message);
    return send(res, 202, answer);
  }
  if (method === 'GET' && path === '/relay/v2/stream') {
    const rec = await known(store, header(req, 'x-anet-aid'));
    await authenticate(store, now, req, path, Buffer.alloc(0), validateKel(rec.kel));
    return relay.attach(rec.aid, req, res);
  }
  throw new HubError(404, 'NOT_FOUND', `no route ${method} ${path}`);
}

/**
 * The ledger (SPEC §10, §11): POST /ledger/mint (the hub's own identity), /ledger/hold and /ledger/settle
 * (the payee), GET /ledger/accounts/<aid> (that AID or the hub). All signed; the ledger decides the rest.
 */
async function handleLedger(store: HubStore, ledger: Ledger, hubKel: KelState, now: () => number, req: IncomingMessage, path: string, method: string, raw: Buffer) {
  const parts = path.split('/').filter(Boolean);
  const route = method === 'GET' && parts.length === 3 && parts[1] === 'accounts' ? 'account' : method === 'POST' && parts.length === 2 ? parts[1] : undefined;
  if (route !== 'account' && route !== 'mint' && route !== 'hold' && route !== 'settle') throw new HubError(404, 'NOT_FOUND', `no route ${method} ${path}`);
  // The hub is no agent of its own directory: its requests are checked against the KEL it loaded.
  const signer = header(req, 'x-anet-aid');
  const kel = signer === hubKel.aid ? hubKel : validateKel((await known(store, signer)).kel);
  await authenticate(store, now, req, path, raw, kel);
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

function header(req: IncomingMessage, name: string): string {
  const v = req.headers[name];
  if (typeof v !== 'string' || v.length === 0) throw new HubError(401, 'UNAUTHENTICATED', `missing ${name}`);
  return v;
}

/** Checks the request signature against `kel`'s current key, the clock window, and nonce reuse. */
async function authenticate(store: HubStore, now: () => number, req: IncomingMessage, path: string, body: Buffer, kel: KelState): Promise<void> {
  const aid = header(req, 'x-anet-aid');
  const time = header(req, 'x-anet-time');
  const nonce = header(req, 'x-anet-nonce');
  const sig = Buffer.from(header(req, 'x-anet-signature'), 'base64url');
  if (aid !== kel.aid) throw new HubError(401, 'UNAUTHENTICATED', 'x-anet-aid is not this agent');
  const t = Number(time);
  if (!/^[0-9]{1,16}$/.test(time) || Math.abs(now() - t) > AUTH_WINDOW_MS) {
    throw new HubError(401, 'CLOCK_SKEW', `request time is more than ${AUTH_WINDOW_MS / 1000} s from the hub's clock`);
  }
  if (!/^[0-9a-f]{32}$/.test(nonce)) throw new HubError(401, 'UNAUTHENTICATED', 'x-anet-nonce must be 16 random bytes in hex');
  if (!verifyEd25519(kel.currentKey, authMessage(req.method ?? '', path, time, nonce, body), sig)) {
    throw new HubError(401, 'UNAUTHENTICATED', 'the request is not signed by the agent\'s current key');
  }
  const key = `${aid}!${nonce}`;
  if ((await store.nonces.get(key)) !== undefined) throw new HubError(401, 'REPLAYED', 'this request was already received');
  await store.nonces.put(key, t);
  await pruneNonces(store, now());
}

let lastPrune = 0;
async function pruneNonces(store: HubStore, at: number): Promise<void> {
  if (at - lastPrune < AUTH_WINDOW_MS) return;
  lastPrune = at;
  const old: string[] = [];
  for await (const [k, t] of store.nonces.iterator()) if ((t as number) < at - 2 * AUTH_WINDOW_MS) old.push(k);
  if (old.length) await store.nonces.batch(old.map((key) => ({ type: 'del' as const, key })));
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

/** Register (or re-register): the KEL must equal or extend the stored one; a card is optional. */
async function register(store: HubStore, now: () => number, req: IncomingMessage, path: string, raw: Buffer) {
  const body = json(raw);
  const { kel, bytes } = kelFrom(body);
  const rec = await store.agent(kel.aid);
  if (rec) acceptKel(validateKel(rec.kel), kel);
  await authenticate(store, now, req, path, raw, kel);
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
  await store.agents.put(kel.aid, next);
  return { aid: kel.aid, seq: next.seq };
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

async function publish(store: HubStore, now: () => number, req: IncomingMessage, path: string, raw: Buffer, aid: string) {
  const rec = await known(store, aid);
  const kel = validateKel(rec.kel);
  await authenticate(store, now, req, path, raw, kel);
  const body = json(raw);
  if (rec.card === body.card) return { aid, seq: rec.seq };
  const c = checkCard(body.card, kel, rec, now());
  await store.agents.put(aid, { ...rec, card: body.card as string, seq: c.seq, digest: c.digest, updatedAt: now() });
  return { aid, seq: c.seq };
}

async function withdraw(store: HubStore, now: () => number, req: IncomingMessage, path: string, raw: Buffer, aid: string) {
  const rec = await known(store, aid);
  await authenticate(store, now, req, path, raw, validateKel(rec.kel));
  // The high-water mark stays, so an older card cannot come back after a withdrawal.
  await store.agents.put(aid, { ...rec, card: null, updatedAt: now() });
  return { aid, withdrawn: true };
}

async function updateKel(store: HubStore, now: () => number, req: IncomingMessage, path: string, raw: Buffer, aid: string) {
  const rec = await known(store, aid);
  const { kel, bytes } = kelFrom(json(raw));
  if (kel.aid !== aid) throw new HubError(400, 'KEL_WRONG_AID', 'the KEL is another AID\'s');
  acceptKel(validateKel(rec.kel), kel);
  // After a rotation the node signs with its new key, which only the new KEL names.
  await authenticate(store, now, req, path, raw, kel);
  await store.agents.put(aid, { ...rec, kel: bytes, updatedAt: now() });
  return { aid, ksn: kel.ksn };
}

async function putKeys(store: HubStore, now: () => number, req: IncomingMessage, path: string, raw: Buffer, aid: string) {
  const rec = await known(store, aid);
  const kel = validateKel(rec.kel);
  await authenticate(store, now, req, path, raw, kel);
  try {
    verifyKeySet(new Uint8Array(raw), kel, now());
  } catch (err) {
    throw new HubError(400, 'BAD_KEY_SET', (err as Error).message);
  }
  await store.agents.put(aid, { ...rec, keys: new Uint8Array(raw), updatedAt: now() });
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

