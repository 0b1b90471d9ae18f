// The reader's side of extended cards (SPEC §6.1–6.3): contact the provider only when its public card
// declares a2a-x402 or we hold a valid contact credential from it; every decision (fetch, serve the 24 h
// cache, hold back inside the 60 s guard, give up after 10 s) is the card-fetch machine's, journaled.
// A reply is taken only when it answers the request the machine is waiting for; its card must verify
// under the provider's KEL and extend the public card we hold (same AID and seq) with strict prices.
// When the newest card cannot be had (no answer, or the guard holds after a failed attempt), the last
// card the provider signed for us in the past 24 h is shown, marked stale; a card that failed its checks
// is never papered over.
import { randomBytes } from 'node:crypto';
import type { Answer } from '../../machines/card-fetch.js';
import {
  cardFetch,
  FETCH_KINDS,
  waitsFor,
  type CardFetchActor,
  type CardFetchView,
  type FetchHost,
  type FetchKind,
} from '../actors/card-fetch.js';
import type { Messenger, MessageHandler } from '../relay/messenger.js';
import { fromBody, toBody } from '../protocol/body.js';
import { CARD_MESSAGE_TTL_MS } from '../card/desk.js';
import { CARD_REQUEST } from '../protocol/messages.js';
import { verifyCard } from '../protocol/card/verify.js';
import { pricesOf, type Price } from '../card/extended.js';
import { recordCard } from '../card/history.js';
import { EXT_CARD } from '../protocol/card/constants.js';
import type { AgentCard } from '../protocol/card/types.js';
import { checkCredential, Contacts } from '../contacts/credential.js';
import type { Store } from '../../store/db.js';
import type { Reader, ReadCard } from './reader.js';

export type ExtendedState = 'ok' | 'not_applicable' | 'not_configured' | null;

export interface ExtendedResult {
  extended: ExtendedState;
  /** Null when the extended card was obtained; else the §6.3 reason. */
  reason: 'not_applicable' | 'not_configured' | 'card_unavailable' | 'card_signature_invalid' | null;
  card: AgentCard | null;
  prices: Price[] | null;
  fetchedAt: number | null;
  /** The answer shown extends an older public card than the one published now (its newest failed). */
  stale: boolean;
  /** sha2-256 of the signed payload of the card shown (what the audit and a payment name). */
  digest?: string;
  /** The last time the provider was asked, when nothing was asked now; and when it may be asked again. */
  lastAttemptAt: number | null;
  nextAttemptAt: number | null;
}

const NOT_ASKED = { stale: false, lastAttemptAt: null, nextAttemptAt: null } as const;
export const NOT_APPLICABLE: ExtendedResult = {
  extended: 'not_applicable',
  reason: 'not_applicable',
  card: null,
  prices: null,
  fetchedAt: null,
  ...NOT_ASKED,
};

export interface FetcherParts {
  me: string;
  /** The runtime and the messenger are started on first need (a one-shot CLI may never need them). */
  host: () => Promise<FetchHost>;
  messenger: () => Promise<Messenger>;
  reader: Reader;
  store: Store;
  now: () => number;
}

function answered(answer: Answer): Omit<ExtendedResult, 'stale' | 'lastAttemptAt' | 'nextAttemptAt'> {
  if (answer.kind === 'not_configured')
    return { extended: 'not_configured', reason: 'not_configured', card: null, prices: null, fetchedAt: answer.fetchedAt };
  const card = JSON.parse(answer.wire) as AgentCard;
  const prices = pricesOf(card);
  return {
    extended: 'ok',
    reason: null,
    card,
    prices: 'error' in prices ? [] : prices.prices,
    fetchedAt: answer.fetchedAt,
    ...(answer.digest ? { digest: answer.digest } : {}),
  };
}

function unanswered(
  reason: 'card_unavailable' | 'card_signature_invalid',
): Omit<ExtendedResult, 'stale' | 'lastAttemptAt' | 'nextAttemptAt'> {
  return { extended: null, reason, card: null, prices: null, fetchedAt: null };
}

export function publicSeqOf(card: AgentCard | null): string | null {
  const seq = card?.capabilities?.extensions?.find((e) => e.uri === EXT_CARD)?.params?.seq;
  return typeof seq === 'string' ? seq : null;
}

export class CardFetcher {
  private readonly contacts: Contacts;
  /** Callers waiting on a request id, woken when its reply (or its end) is journaled. */
  private readonly waiters = new Map<string, (() => void)[]>();

  constructor(private readonly parts: FetcherParts) {
    this.contacts = new Contacts(parts.store);
  }

  /** A valid contact credential from `aid`, if we hold one (an expired or invalid one is dropped). */
  async credentialFrom(aid: string): Promise<boolean> {
    const bytes = await this.contacts.held(aid);
    if (!bytes) return false;
    const kel = await this.parts.reader.kel(aid);
    const check = kel ? checkCredential(bytes, { iss: aid, sub: this.parts.me, kel, now: this.parts.now() }) : { ok: false as const };
    if (!check.ok) await this.contacts.forget(aid);
    return check.ok;
  }

  /** The §6.3 outcome for a provider whose public card verified. */
  async extended(pub: ReadCard): Promise<ExtendedResult> {
    const seq = publicSeqOf(pub.card);
    const credential = await this.credentialFrom(pub.aid);
    if (!seq || (pub.charge === 'free' && !credential)) return NOT_APPLICABLE;
    const requestId = randomBytes(12).toString('hex');
    const kind: FetchKind = credential ? 'list' : 'general';
    const actor = await this.actor(pub.aid, kind);
    let v = await actor.need(this.parts.now(), seq, requestId);
    const ctx = v.context;
    if (ctx.decision === 'fetch') v = await this.request(pub.aid, actor, requestId, kind, ctx.waitUntil!);
    else if (v.state === 'waiting') v = await this.await(actor, ctx.requestId!, ctx.waitUntil!);
    return this.result(v, seq);
  }

  private async actor(aid: string, kind: FetchKind): Promise<CardFetchActor> {
    return cardFetch(await this.parts.host(), aid, kind);
  }

  /** Sends `card.request`; a request that cannot be sent is journaled as an `unreachable` REPLY at once. */
  private async request(aid: string, actor: CardFetchActor, rid: string, kind: FetchKind, waitUntil: number): Promise<CardFetchView> {
    try {
      const messenger = await this.parts.messenger();
      await messenger.send(aid, CARD_REQUEST, toBody({ kind, rid }), { ttlMs: CARD_MESSAGE_TTL_MS });
    } catch {
      // No key set, no KEL, the hub down or the queue full: the card cannot be had now.
      return actor.reply({ at: this.parts.now(), requestId: rid, result: 'unreachable' });
    }
    return this.await(actor, rid, waitUntil);
  }

  /** Waits for the reply to `rid` or the end of the 10 s wait (journaled as a TICK), then returns the machine's state. */
  private async await(actor: CardFetchActor, rid: string, waitUntil: number): Promise<CardFetchView> {
    for (;;) {
      let wake!: () => void;
      const woken = new Promise<void>((resolve) => (wake = resolve));
      this.waiters.set(rid, [...(this.waiters.get(rid) ?? []), wake]);
      // Registered first, then read: a reply taken before we registered is seen in the state.
      let v = (await actor.read())!;
      if (!waitsFor(v, rid)) return this.unwait(rid, wake, v);
      if (this.parts.now() >= waitUntil) {
        v = await actor.tick(this.parts.now());
        if (!waitsFor(v, rid)) return this.unwait(rid, wake, v);
      }
      // Re-read at least every second, so a clock that jumps (NTP, or a test) is noticed.
      const delay = Math.min(1000, Math.max(0, waitUntil - this.parts.now()));
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([woken, new Promise<void>((resolve) => (timer = setTimeout(resolve, delay)))]);
      clearTimeout(timer);
      this.unwait(rid, wake, v);
    }
  }

  private unwait(rid: string, wake: () => void, v: CardFetchView): CardFetchView {
    const left = (this.waiters.get(rid) ?? []).filter((w) => w !== wake);
    if (left.length) this.waiters.set(rid, left);
    else this.waiters.delete(rid);
    return v;
  }

  private wake(rid: string): void {
    for (const wake of this.waiters.get(rid) ?? []) wake();
    this.waiters.delete(rid);
  }

  /** What `seq` (the public card's, as this look saw it) gets from the machine's state. */
  private result(v: CardFetchView, seq: string): ExtendedResult {
    const ctx = v.context;
    // Nothing was asked by this NEED: say when the provider was last asked and when it may be again.
    const attempt =
      ctx.decision === 'guarded'
        ? { lastAttemptAt: ctx.lastAttemptAt, nextAttemptAt: ctx.guardUntil }
        : { lastAttemptAt: null, nextAttemptAt: null };
    // Cached, yet older than this look's seq: a request for the newer card was already out (its reply
    // answered the older one).
    if (v.state === 'cached') return { ...answered(ctx.held!.answer), stale: BigInt(ctx.held!.publicSeq) < BigInt(seq), ...attempt };
    if (ctx.outcome?.kind === 'card_signature_invalid') return { ...unanswered('card_signature_invalid'), stale: false, ...attempt };
    // Unavailable now: what the provider signed for us within the last 24 h, though for an older seq.
    if (ctx.held) return { ...answered(ctx.held.answer), stale: true, ...attempt };
    return { ...unanswered('card_unavailable'), stale: false, ...attempt };
  }

  /** `card.reply`: taken only when it answers the request the provider's machine is waiting for. */
  onReply(): MessageHandler {
    return async (m) => {
      const body = fromBody(m.body);
      const rid = body?.rid;
      if (!body || typeof rid !== 'string') return;
      for (const kind of FETCH_KINDS) {
        const actor = await this.actor(m.from, kind);
        const v = await actor.read();
        if (!waitsFor(v, rid)) continue;
        await this.takeCredential(m.from, body.credential);
        // Whatever goes wrong judging a reply, it was not a card we can use: never an unjudged wait.
        const result = await this.judge(m.from, v.context.publicSeq!, body).catch(() => ({ result: 'invalid' as const }));
        await actor.reply({ at: m.at, requestId: rid, ...result });
        this.wake(rid);
        return;
      }
    };
  }

  /** `contact.credential`: a provider renewing our credential after its key rotation. */
  onCredential(): MessageHandler {
    return async (m) => {
      const credential = fromBody(m.body)?.credential;
      if (credential instanceof Uint8Array) await this.takeCredential(m.from, credential);
    };
  }

  /** A reply with a credential renews ours; a reply without one means we are no longer on its lists. */
  private async takeCredential(from: string, credential: unknown): Promise<void> {
    if (!(credential instanceof Uint8Array)) return this.contacts.forget(from);
    const kel = await this.parts.reader.kel(from);
    if (kel && checkCredential(credential, { iss: from, sub: this.parts.me, kel, now: this.parts.now() }).ok)
      await this.contacts.keep(from, credential);
  }

  private async judge(
    from: string,
    publicSeq: string,
    body: Record<string, unknown>,
  ): Promise<{ result: 'ok' | 'not_configured' | 'invalid'; wire?: string; digest?: string; seq?: string }> {
    if (body.not_configured === true && body.card === undefined) return { result: 'not_configured' };
    if (typeof body.card !== 'string') return { result: 'invalid' };
    const kel = await this.parts.reader.kel(from);
    const check = verifyCard(body.card, { kel, now: this.parts.now() });
    // Its seq may be above the public card we read (the provider published since): a newer card it
    // signed is as good; an older one would let it take back a price, so it counts as invalid.
    if (!check.ok || check.identity.aid !== from || check.seq < BigInt(publicSeq) || 'error' in pricesOf(check.card))
      return { result: 'invalid' };
    const seq = check.seq.toString();
    await recordCard(this.parts.store, {
      aid: from,
      seq,
      digest: check.digest,
      wire: body.card,
      source: 'peer (extended card)',
      obtainedAt: this.parts.now(),
    });
    return { result: 'ok', wire: body.card, digest: check.digest, ...(seq !== publicSeq ? { seq } : {}) };
  }
}
