// The relay's routes (SPEC §11, WIRE §4): POST /relay/v2/send, GET /relay/v2/stream, POST /relay/v2/ack,
// and the upgrade of GET /relay/v2/upstream to an upstream connection. What happens to an envelope is
// src/hub/relay.ts's.
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { ACK_HEADER, MAX_ACK_IDS, MAX_ENVELOPE, UPSTREAM_PROTOCOL } from '../protocol/relay.js';
import { MAX_ACK_BLOBS, blobDigest } from '../protocol/blob-address.js';
import { validateKel } from '../identity/kel.js';
import type { Relay } from './relay.js';
import type { HubContext } from './context.js';
import { HubError, send, readBody, json } from './http.js';
import { header } from './auth.js';
import { known } from './directory.js';

const BUSY_RELAY = 'the hub is receiving too many messages at once; retry shortly';

/** An ack's body: 1000 ids of 64 hex digits and 1000 blob CIDs of 59 characters, quoted, with commas and the wrapping. */
const MAX_ACK_BODY = 144 * 1024;

/**
 * POST /relay/v2/send (anonymous: an envelope names only its recipient); GET /relay/v2/stream (signed;
 * `x-anet-ack: 1` from a node that acknowledges); POST /relay/v2/ack (signed by the recipient).
 */
export async function handleRelay(
  ctx: HubContext,
  client: string,
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  method: string,
): Promise<void> {
  if (method === 'POST' && path === '/relay/v2/send') {
    const body = await readBody(ctx, req, client, MAX_ENVELOPE, ctx.relay.uploads, BUSY_RELAY);
    const answer = await ctx.relay.answer(new Uint8Array(body.buffer, body.byteOffset, body.length), client);
    if ('error' in answer) throw new HubError(answer.error.status, answer.error.code, answer.error.message);
    return send(res, 202, answer);
  }
  if (method === 'GET' && path === '/relay/v2/stream') {
    const rec = await known(ctx.storage, header(req, 'x-anet-aid'));
    await ctx.auth.check(req, path, Buffer.alloc(0), validateKel(rec.kel));
    return ctx.relay.attach(rec.aid, req, res, req.headers[ACK_HEADER] === '1');
  }
  if (method === 'POST' && path === '/relay/v2/ack') {
    const body = await readBody(ctx, req, client, MAX_ACK_BODY, ctx.bodies, BUSY_RELAY);
    const rec = await known(ctx.storage, header(req, 'x-anet-aid'));
    await ctx.auth.check(req, path, body, validateKel(rec.kel));
    const { ids, blobs } = ackBody(body);
    // A blob is deleted by anyone signed who names it: knowing its CID means holding the sealed task that
    // carries it, or having uploaded it (PROTOCOL §8.11).
    const deleted = blobs.length ? await ctx.blobs.delete(blobs) : 0;
    return send(res, 200, { acked: await ctx.relay.ack(rec.aid, ids), blobs: deleted });
  }
  throw new HubError(404, 'NOT_FOUND', `no route ${method} ${path}`);
}

/**
 * An ack's body `{"ids": ["<hex sha256>", …], "blobs": ["<blob cid>", …]}`: each list at most 1000 long,
 * either one absent or empty, not both.
 */
function ackBody(body: Buffer): { ids: string[]; blobs: string[] } {
  const { ids = [], blobs = [] } = json(body);
  const list = (v: unknown, max: number, ok: (x: string) => boolean) =>
    Array.isArray(v) && v.length <= max && v.every((x) => typeof x === 'string' && ok(x));
  const valid =
    list(ids, MAX_ACK_IDS, (id) => /^[0-9a-f]{64}$/.test(id)) &&
    list(blobs, MAX_ACK_BLOBS, (cid) => blobDigest(cid) !== null) &&
    (ids as string[]).length + (blobs as string[]).length > 0;
  if (!valid)
    throw new HubError(
      400,
      'BAD_REQUEST',
      `an ack's body is {"ids": [...], "blobs": [...]}: up to ${MAX_ACK_IDS} envelope ids (each the hex sha256 of the envelope) and up to ${MAX_ACK_BLOBS} blob CIDs, at least one in all`,
    );
  return { ids: ids as string[], blobs: blobs as string[] };
}

/**
 * `GET /relay/v2/upstream` with `Upgrade: anet-relay-upstream` (see UPSTREAM_PROTOCOL); any other upgrade
 * is refused (Node hands every request that asks for one here, curl --http2 asking for h2c included). An
 * upgrade pipelined behind a request still being answered would mix that answer into the new protocol:
 * its connection is closed.
 */
export function upgrade(
  relay: Relay,
  answering: (socket: Socket) => boolean,
  client: string,
  req: IncomingMessage,
  socket: Socket,
  head: Buffer,
): void {
  socket.on('error', () => socket.destroy());
  try {
    if (answering(socket)) return void socket.destroy();
    if (req.method !== 'GET' || req.url !== '/relay/v2/upstream' || req.headers.upgrade?.toLowerCase() !== UPSTREAM_PROTOCOL) {
      refuseUpgrade(socket, 400, 'BAD_UPGRADE', `this hub upgrades only GET /relay/v2/upstream, to ${UPSTREAM_PROTOCOL}`);
      return;
    }
    if (!relay.upstreamRoom()) {
      refuseUpgrade(socket, 503, 'BUSY', 'the hub has too many upstreams open; POST to /relay/v2/send');
      return;
    }
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
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
