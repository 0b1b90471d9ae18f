// Registration and admission (SPEC §11, PROTOCOL §8.4): POST /agents registers an AID (its KEL, a name,
// optionally a card) or re-registers it; a new AID is admitted by a single-use invite the hub's operator
// made (POST /invites, `anet hub invite`), else, when the hub asks for none, within a per-client rate.
import type { IncomingMessage } from 'node:http';
import { validateKel } from '../identity/kel.js';
import { randomHex } from '../util/random.js';
import { isInviteToken, inviteKey } from './store.js';
import type { AgentRecord, HubStorage, Invite } from './storage/types.js';
import type { HubContext } from './context.js';
import { HubError, json } from './http.js';
import { header } from './auth.js';
import { kelFrom, checkCard, acceptKel } from './directory.js';

/** A token bucket per client: `perMinute` at most, refilled evenly over the minute. */
export class RateLimit {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    private readonly perMinute: number,
    private readonly now: () => number,
  ) {}

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
 * Register (or re-register): the KEL must equal or extend the stored one; a card is optional. A new AID is
 * admitted by an invite when the body carries one, else only when the hub asks for none, and then within
 * the per-client limit of new AIDs a minute.
 */
export async function register(ctx: HubContext, client: string, req: IncomingMessage, path: string, raw: Buffer) {
  const { storage, now } = ctx;
  const body = json(raw);
  const { kel, bytes } = kelFrom(body);
  const rec = await storage.agents.get(kel.aid);
  if (rec) acceptKel(validateKel(rec.kel), kel);
  await ctx.auth.check(req, path, raw, kel);
  const at = now();
  /** The record this registration makes of `cur` (checked against it: the KEL extends it, the card is newer). */
  const build = (cur: AgentRecord | undefined): AgentRecord => {
    if (cur) acceptKel(validateKel(cur.kel), kel);
    const name = typeof body.name === 'string' && body.name.length > 0 ? body.name.slice(0, 128) : (cur?.name ?? '');
    const next: AgentRecord = {
      aid: kel.aid,
      name,
      kel: bytes,
      card: cur?.card ?? null,
      seq: cur?.seq ?? null,
      digest: cur?.digest ?? null,
      // A re-registration (a new name, a new card) keeps the node's encryption keys: without them no peer
      // could reach it until its daemon restarted.
      ...(cur?.keys ? { keys: cur.keys } : {}),
      updatedAt: at,
    };
    if (body.card !== undefined && body.card !== null && !(cur?.card === body.card)) {
      const c = checkCard(body.card, kel, cur, at);
      Object.assign(next, { card: body.card, seq: c.seq, digest: c.digest });
    }
    return next;
  };
  // A new AID is admitted first (invite or rate); then, as for a known one, the record is made from what
  // is stored at that moment, so two registrations of one AID racing on any replicas cannot undo each other.
  const written = rec ? await storage.agents.update(kel.aid, build) : await admit(ctx, client, body.invite, build);
  // Who registered is the directory's to show, not the log's above debug (src/util/log.ts).
  if (!rec) ctx.log(`new agent registered${body.invite ? ' with an invite' : ''}`);
  ctx.log(`${rec ? 're-registered' : 'registered'} ${kel.aid}`, 'debug');
  return { aid: kel.aid, seq: written?.seq ?? null };
}

/** Writes the record of a new AID, if it is admitted (see register()). */
async function admit(
  ctx: HubContext,
  client: string,
  invite: unknown,
  build: (cur: AgentRecord | undefined) => AgentRecord,
): Promise<AgentRecord | null> {
  if (invite !== undefined && invite !== null) {
    if (!isInviteToken(invite)) throw new HubError(403, 'BAD_INVITE', 'an invite is the 32 hex characters `anet hub invite` printed');
    // One token, one new AID, however many race for it, on any replica (the storage's atomic step).
    const next = build(undefined);
    const outcome = await ctx.storage.agents.admit(next, inviteKey(invite), ctx.now());
    if (outcome === 'unknown') throw new HubError(403, 'BAD_INVITE', 'this hub made no such invite');
    if (outcome === 'used') throw new HubError(403, 'BAD_INVITE', 'this invite was already used: each registers one new AID');
    // Registered meanwhile by another first registration: this one is a re-registration (the invite unspent).
    if (outcome === 'exists') return ctx.storage.agents.update(next.aid, build);
    return next;
  }
  if (ctx.requireInvite) {
    throw new HubError(
      403,
      'INVITE_REQUIRED',
      'this hub admits new AIDs by invitation only: ask its operator for an invite (`anet hub invite`), then register with `anet hub-register --name NAME --invite TOKEN`',
    );
  }
  const wait = ctx.registrations?.take(client) ?? 0;
  if (wait > 0) throw new HubError(429, 'RATE_LIMITED', `too many new AIDs registered from this address; retry in ${wait} s`, wait);
  return ctx.storage.agents.update(build(undefined).aid, build);
}

/** POST /invites, signed by the hub's own identity (`anet hub invite`): a new single-use invite token. */
export async function mintInvite(ctx: HubContext, req: IncomingMessage, path: string, raw: Buffer) {
  if (header(req, 'x-anet-aid') !== ctx.hubKel.aid)
    throw new HubError(403, 'NOT_HUB', "only the hub's operator makes invites (`anet hub invite`)");
  await ctx.auth.check(req, path, raw, ctx.hubKel);
  return { token: await mintInviteToken(ctx.storage, ctx.now()) };
}

/** Mints an invite (synced): the token, which only its holder will know; the storage keeps its digest. */
export async function mintInviteToken(storage: HubStorage, now: number): Promise<string> {
  const token = randomHex(16);
  const invite: Invite = { createdAt: now, usedBy: null, usedAt: null };
  await storage.agents.invite(inviteKey(token), invite);
  return token;
}
