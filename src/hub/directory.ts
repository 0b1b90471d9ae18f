// The hub's directory and KEL store (SPEC §11, PROTOCOL §8): reads (search, a card, a KEL, the JWKS, the
// encryption key set) need nothing; writes (publish, withdraw, a new KEL after a rotation, the key set) are
// signed by the agent. Every card is verified on entry against the KEL the hub holds, and the highest seq
// and its digest are kept across withdrawals, so an older or forked card cannot come back.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { verifyKeySet } from '../protocol/keyset.js';
import { verifyCard } from '../protocol/card/verify.js';
import type { AgentCard } from '../protocol/card/types.js';
import { validateKel, compareKel, KelError, type KelState } from '../identity/kel.js';
import type { AgentRecord, HubStorage, SearchQuery } from './storage/types.js';
import { BadCursor, BadSearch } from './search/index.js';
import type { HubContext } from './context.js';
import { HubError, send, json } from './http.js';
import type { HubMetrics } from './metrics.js';

/** GET /agents/<aid>/{card,kel,jwks.json,keys}: false when `what` is none of these. */
export async function showAgent(
  storage: HubStorage,
  res: ServerResponse,
  aid: string,
  what: string | undefined,
  metrics?: HubMetrics,
): Promise<boolean> {
  const rec = await storage.agents.get(aid);
  if (what === 'card') metrics?.cardFetched(!rec ? 'unknown_aid' : rec.card ? 'ok' : 'withdrawn');
  if (!rec) throw new HubError(404, 'UNKNOWN_AID', `no agent ${aid} on this hub`);
  if (what === 'card') {
    if (!rec.card) throw new HubError(404, 'NO_CARD', `${aid} has withdrawn its card`);
    send(res, 200, rec.card);
    return true;
  }
  if (what === 'kel') {
    send(res, 200, Buffer.from(rec.kel), 'application/cbor');
    return true;
  }
  if (what === 'jwks.json') {
    send(res, 200, jwks(rec));
    return true;
  }
  if (what === 'keys') {
    if (!rec.keys) throw new HubError(404, 'NO_KEYS', `${aid} has published no encryption keys`);
    send(res, 200, Buffer.from(rec.keys), 'application/cbor');
    return true;
  }
  return false;
}

export function kelFrom(body: Record<string, unknown>): { kel: KelState; bytes: Uint8Array } {
  if (typeof body.kel !== 'string') throw new HubError(400, 'BAD_REQUEST', 'kel must be base64 CoreDet CBOR');
  const bytes = new Uint8Array(Buffer.from(body.kel, 'base64'));
  try {
    return { kel: validateKel(bytes), bytes };
  } catch (err) {
    if (err instanceof KelError) throw new HubError(400, `KEL_${err.code}`, err.message);
    throw err;
  }
}

export function checkCard(
  wire: unknown,
  kel: KelState,
  rec: AgentRecord | undefined,
  now: number,
): { seq: string; digest: string; card: AgentCard } {
  if (typeof wire !== 'string') throw new HubError(400, 'BAD_REQUEST', 'card must be the signed card JSON, as a string');
  const highWater = rec?.seq ? { seq: BigInt(rec.seq), digest: rec.digest! } : null;
  const r = verifyCard(wire, { kel, now, highWater });
  if (!r.ok) throw new HubError(r.code === 'SEQ_ROLLBACK' || r.code === 'SEQ_FORK' ? 409 : 400, r.code, r.detail);
  return { seq: r.seq.toString(), digest: r.digest, card: r.card };
}

export function acceptKel(known: KelState, incoming: KelState): void {
  const cmp = compareKel(known, incoming);
  if (cmp.kind === 'shorter') throw new HubError(409, 'KEL_ROLLBACK', 'the hub holds a longer KEL for this AID');
  if (cmp.kind === 'duplicity') throw new HubError(409, 'KEL_DUPLICITY', `a different event at seq ${cmp.seq}`);
  if (cmp.kind === 'other_aid') throw new HubError(400, 'KEL_WRONG_AID', "the KEL is another AID's");
}

export async function known(storage: HubStorage, aid: string): Promise<AgentRecord> {
  const rec = await storage.agents.get(aid);
  if (!rec) throw new HubError(404, 'UNKNOWN_AID', `no agent ${aid} on this hub: register first`);
  return rec;
}

/** `fn` applied to the stored record of a known AID, atomically (AgentStore.update); UNKNOWN_AID if none. */
function updateKnown(ctx: HubContext, aid: string, fn: (cur: AgentRecord) => AgentRecord | null) {
  return ctx.storage.agents.update(aid, (cur) => {
    if (!cur) throw new HubError(404, 'UNKNOWN_AID', `no agent ${aid} on this hub: register first`);
    return fn(cur);
  });
}

export async function publish(ctx: HubContext, req: IncomingMessage, path: string, raw: Buffer, aid: string) {
  const { storage, now } = ctx;
  const rec = await known(storage, aid);
  await ctx.auth.check(req, path, raw, validateKel(rec.kel));
  const body = json(raw);
  let seq: string | null = null;
  // Checked against the record it replaces (its KEL, its high-water mark), whatever happened since the read.
  await updateKnown(ctx, aid, (cur) => {
    seq = cur.seq;
    if (cur.card === body.card) return null;
    const c = checkCard(body.card, validateKel(cur.kel), cur, now());
    seq = c.seq;
    return { ...cur, card: body.card as string, seq: c.seq, digest: c.digest, updatedAt: now() };
  });
  ctx.log(`card of ${aid} at seq ${seq}`, 'debug');
  return { aid, seq };
}

export async function withdraw(ctx: HubContext, req: IncomingMessage, path: string, raw: Buffer, aid: string) {
  const rec = await known(ctx.storage, aid);
  await ctx.auth.check(req, path, raw, validateKel(rec.kel));
  // The high-water mark stays, so an older card cannot come back after a withdrawal.
  await updateKnown(ctx, aid, (cur) => ({ ...cur, card: null, updatedAt: ctx.now() }));
  return { aid, withdrawn: true };
}

export async function updateKel(ctx: HubContext, req: IncomingMessage, path: string, raw: Buffer, aid: string) {
  const rec = await known(ctx.storage, aid);
  const { kel, bytes } = kelFrom(json(raw));
  if (kel.aid !== aid) throw new HubError(400, 'KEL_WRONG_AID', "the KEL is another AID's");
  acceptKel(validateKel(rec.kel), kel);
  // After a rotation the node signs with its new key, which only the new KEL names.
  await ctx.auth.check(req, path, raw, kel);
  // Two updates at once: each must extend the KEL it replaces (a duplicitous one is refused then).
  await updateKnown(ctx, aid, (cur) => {
    acceptKel(validateKel(cur.kel), kel);
    return { ...cur, kel: bytes, updatedAt: ctx.now() };
  });
  return { aid, ksn: kel.ksn };
}

export async function putKeys(ctx: HubContext, req: IncomingMessage, path: string, raw: Buffer, aid: string) {
  const rec = await known(ctx.storage, aid);
  await ctx.auth.check(req, path, raw, validateKel(rec.kel));
  const keys = new Uint8Array(raw);
  // From now on the relay keeps envelopes for it while it is offline (storage.agents.isRecipient).
  await updateKnown(ctx, aid, (cur) => {
    try {
      verifyKeySet(keys, validateKel(cur.kel), ctx.now());
    } catch (err) {
      throw new HubError(400, 'BAD_KEY_SET', (err as Error).message);
    }
    return { ...cur, keys, updatedAt: ctx.now() };
  });
  return { aid };
}

function jwks(rec: AgentRecord) {
  const kel = validateKel(rec.kel);
  return {
    keys: [
      {
        kty: 'OKP',
        crv: 'Ed25519',
        alg: 'EdDSA',
        kid: `did:anet:${rec.aid}#${kel.ksn}`,
        x: Buffer.from(kel.currentKey).toString('base64url'),
      },
    ],
  };
}

/** The words of a query: lowercased, split on white space. */
const words = (text: string) => text.toLowerCase().split(/\s+/).filter(Boolean);

/**
 * GET /agents: search by words (all must match; ranked by the storage's directory index, src/hub/search/),
 * skill id and tag; `next` continues the order (an opaque cursor).
 */
export async function search(storage: HubStorage, params: URLSearchParams) {
  const query: SearchQuery = {
    words: words(params.get('q') ?? ''),
    skill: params.get('skill'),
    tag: params.get('tag'),
    limit: Math.min(Math.max(Number(params.get('limit') ?? 20) || 20, 1), 100),
    cursor: params.get('cursor'),
  };
  let page: Awaited<ReturnType<HubStorage['agents']['search']>>;
  try {
    page = await storage.agents.search(query);
  } catch (err) {
    if (err instanceof BadCursor) throw new HubError(400, 'BAD_CURSOR', `${err.message}: pass the \`next\` of the page before, unchanged`);
    if (err instanceof BadSearch) throw new HubError(400, 'BAD_REQUEST', err.message);
    throw err;
  }
  const agents = page.agents.map((rec) => ({
    aid: rec.aid,
    name: rec.name,
    card: rec.card!,
    kel: Buffer.from(rec.kel).toString('base64'),
    updatedAt: rec.updatedAt,
  }));
  return { agents, next: page.next };
}
