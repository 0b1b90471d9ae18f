// The caller's side of payments (SPEC §10). A provider's `input-required` answer carries a signed x402
// quote. The caller pays it automatically only when ALL hold: it holds the provider's verified extended
// card with a price for that skill; the quote is within that signed price, within `payments.auto_max`,
// and within `payments.daily_max` over any 24 h; and network, asset and payTo match the card. Otherwise
// the task stays `input-required` until the operator runs `anet pay` or `anet reject`. Each payment is
// a `payment/<provider>/<task>` machine: AUTHORIZE is journaled (nonce and validBefore in the event)
// before the authorization leaves, and the task is marked in `paying` until it ends, so a restart sends
// the same bytes again — the hub holds by nonce, so it is still one payment.
import { randomHex } from '../../util/random.js';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Store } from '../../../store/db.js';
import type { Messenger } from '../../relay/messenger.js';
import type { Reader } from '../../reader/reader.js';
import type { Identity } from '../../identity/store.js';
import { unanswered, type PaymentContext } from '../../../machines/payment.js';
import type { ActorHost } from '../../runtime/host.js';
import { payment, type Payment } from '../../actors/payment.js';
import { autoSpend } from '../../actors/spend.js';
import { toBody } from '../../protocol/body.js';
import { PROMPT_MESSAGE_TTL_MS } from '../../protocol/envelope.js';
import { checkQuote, QUOTE_SECONDS, X402_VERSION, type PaymentRequirements } from '../../protocol/quote.js';
import { signAuthorization } from '../../protocol/authorization.js';
import { crashPoint } from '../../util/crash.js';
import {
  TASK_PAY,
  TASK_CANCEL,
  X402_STATUS,
  X402_REQUIRED,
  X402_PAYLOAD,
  X402_RECEIPTS,
  QUOTE_SIGNATURE,
} from '../../protocol/messages.js';

export type PaymentStatus = 'payment-required' | 'payment-submitted' | 'payment-completed' | 'payment-failed' | 'payment-rejected';

export interface SignedPrice {
  amount: string;
  network: string;
  asset: string;
  /** The extended card the price was signed in: its seq and digest (what `anet audit prices` shows). */
  seq: string;
  digest: string;
  fetchedAt: number;
  /** The card is older than the provider's public card now (its newest could not be had); that seq. */
  stale?: boolean;
  publicSeq?: string;
}

export interface PaymentRecord {
  status: PaymentStatus;
  skillId: string;
  /** The x402 PaymentRequired JSON exactly as the provider signed it, and its signature. */
  required: string;
  signature: string;
  /** The verified quote, or null with `quoteError` when it did not verify. */
  quote: PaymentRequirements | null;
  quoteError: string | null;
  receivedAt: number;
  expiresAt: number;
  /** Whether the auto-pay rule has been applied yet, its verdict, and why not when it said no. */
  decided: boolean;
  auto: boolean | null;
  why: string | null;
  price: SignedPrice | null;
  nonce: string | null;
  authorizedAt: number | null;
  hubTx: string | null;
  receipts: unknown;
}

export interface PayerParts {
  identity: Identity;
  store: Pick<Store, 'paying' | 'tasks'>;
  reader: Pick<Reader, 'kel'>;
  host: () => Promise<ActorHost>;
  messenger: () => Promise<Pick<Messenger, 'send'>>;
  now: () => number;
  payments: { auto_max: bigint; daily_max: bigint };
  hubAid: () => Promise<string>;
  /** The provider's signed price for a skill, from its verified extended card (fetched if need be). */
  signedPrice: (aid: string, skillId: string) => Promise<SignedPrice | { why: string }>;
}

// A payment is part of a call: its messages live as a call's do, not as long as mail for an offline node.
const MESSAGE_TTL_MS = PROMPT_MESSAGE_TTL_MS - 60_000;

/** What the caller needs to know of a task to pay it. */
export interface Payable {
  task: string;
  to: string;
  capability: string;
  payment: PaymentRecord | null;
}

/**
 * The `paying` mark of an authorized payment, keyed by its actor's id and written in the batch of the
 * event that authorizes it; without a value, it goes in the batch of the event that ends the payment.
 */
interface PayingMark {
  task: string;
  to: string;
}
const paying = (actor: Payment, mark?: PayingMark) =>
  mark ? { sublevel: 'paying' as const, key: actor.id, value: mark } : { sublevel: 'paying' as const, key: actor.id };

export class PaymentError extends Error {
  override name = 'PaymentError';
}

export class Payer {
  constructor(private readonly parts: PayerParts) {}

  /** The quote in an `input-required` answer, checked and journaled (the auto-pay rule comes next). */
  async quoted(t: Payable, body: Record<string, unknown>, at: number): Promise<PaymentRecord> {
    const required = String(body[X402_REQUIRED] ?? '');
    const signature = String(body[QUOTE_SIGNATURE] ?? '');
    const kel = await this.parts.reader.kel(t.to);
    const check = kel
      ? checkQuote(required, signature, { kel, task: t.task, capability: t.capability })
      : { ok: false as const, why: "the provider's KEL is not available" };
    const expiresAt = at + QUOTE_SECONDS * 1000;
    const record: PaymentRecord = {
      status: 'payment-required',
      skillId: t.capability,
      required,
      signature,
      quote: check.ok ? check.quote : null,
      quoteError: check.ok ? null : check.why,
      receivedAt: at,
      expiresAt,
      decided: !check.ok,
      auto: check.ok ? null : false,
      why: check.ok ? null : check.why,
      price: null,
      nonce: null,
      authorizedAt: null,
      hubTx: null,
      receipts: null,
    };
    if (check.ok) {
      const q = check.quote;
      await payment(await this.parts.host(), t.to, t.task).quote({
        task: t.task,
        provider: t.to,
        skillId: t.capability,
        quoteId: q.extra.quoteId,
        amount: q.amount,
        expiresAt,
      });
    }
    return record;
  }

  /** Applies the auto-pay rule; pays when it allows. Returns the payment as it now stands. */
  async decide(t: Payable & { payment: PaymentRecord }): Promise<PaymentRecord> {
    const p = t.payment;
    if (p.decided || !p.quote) return { ...p, decided: true };
    const q = p.quote;
    const price = await this.parts.signedPrice(t.to, t.capability);
    const no = (why: string, priceSeen: SignedPrice | null = null): PaymentRecord => ({
      ...p,
      decided: true,
      auto: false,
      why,
      price: priceSeen,
    });
    if ('why' in price) return no(`no signed price to check the quote against: ${price.why}`);
    if (BigInt(q.amount) > BigInt(price.amount)) return no(`the quote (${q.amount}) is above the signed price (${price.amount})`, price);
    // A superseded card's price may be one the provider has since taken back: the operator decides.
    if (price.stale)
      return no(
        `its newest signed prices could not be obtained (the price held is of card seq ${price.seq}; its public card is at seq ${price.publicSeq})`,
        price,
      );
    if (BigInt(q.amount) > this.parts.payments.auto_max)
      return no(`the quote (${q.amount}) is above payments.auto_max (${this.parts.payments.auto_max})`, price);
    const ours = `hub:${await this.parts.hubAid()}`;
    if (q.network !== price.network || q.network !== ours || q.asset !== price.asset || q.payTo !== t.to) {
      return no(
        `the quote's network, asset or payee (${q.network}, ${q.asset}) differ from the signed card's or from our hub (${ours})`,
        price,
      );
    }
    const spend = autoSpend(await this.parts.host());
    const admitted = await spend.admit(t.task, q.amount, this.parts.payments.daily_max.toString());
    if (!admitted.accepted)
      return no(
        `paying ${q.amount} would take automatic payments past payments.daily_max (${this.parts.payments.daily_max}) in 24 h`,
        price,
      );
    let paid: PaymentRecord | null = null;
    try {
      paid = await this.authorize({ ...t, payment: { ...p, price } }, true);
      return paid;
    } finally {
      if (paid?.status !== 'payment-submitted') await spend.undo(t.task);
    }
  }

  /** `anet pay`: the operator pays a quote the rule did not pay. */
  async pay(t: Payable): Promise<PaymentRecord> {
    const p = t.payment;
    if (p?.status !== 'payment-required') throw new PaymentError(`task ${t.task} is not waiting for a payment`);
    if (!p.quote) throw new PaymentError(`the quote of task ${t.task} cannot be paid: ${p.quoteError}`);
    const paid = await this.authorize({ ...t, payment: p }, false);
    if (paid.status !== 'payment-submitted') throw new PaymentError(`the quote of task ${t.task} has expired; send the task again`);
    return paid;
  }

  /** `anet reject`: declines the quote and tells the provider. */
  async reject(t: Payable): Promise<PaymentRecord> {
    const p = t.payment;
    if (p?.status !== 'payment-required') throw new PaymentError(`task ${t.task} is not waiting for a payment`);
    if (p.quote) {
      // The machine decides: a payment already authorized (its sending failed, or we stopped before it
      // left) is on its way and cannot be called back.
      const after = await payment(await this.parts.host(), t.to, t.task).reject();
      if (after.value !== 'rejected')
        throw new PaymentError(
          `task ${t.task} was already ${after.value === 'authorized' ? 'paid: the payment is on its way' : after.value}; it cannot be rejected`,
        );
    }
    const messenger = await this.parts.messenger();
    await messenger.send(t.to, TASK_CANCEL, toBody({ task: t.task, [X402_STATUS]: 'payment-rejected' }), { ttlMs: MESSAGE_TTL_MS });
    return { ...p, status: 'payment-rejected', decided: true };
  }

  /**
   * AUTHORIZE (journaled, with the paying mark), then the signed authorization goes to the provider in a
   * `task.pay`. A quote past its deadline is not paid.
   */
  private async authorize(t: Payable & { payment: PaymentRecord }, auto: boolean): Promise<PaymentRecord> {
    const p = t.payment;
    const at = this.parts.now();
    const nonce = randomHex(16);
    // The authorization is good exactly as long as the quote it pays.
    const validBefore = p.expiresAt;
    const actor = payment(await this.parts.host(), t.to, t.task);
    const after = await actor.authorize({ nonce, validBefore, auto }, [paying(actor, { task: t.task, to: t.to })]);
    if (after.value !== 'authorized') return { ...p, decided: true, auto: false, why: 'the quote expired before it was paid' };
    crashPoint('after-authorize');
    // Authorized is paid as far as this node is concerned: a send that fails now is tried again (and at
    // the next start), always the same bytes.
    void this.sendUntilSent(after.context, p.quote!);
    return { ...p, status: 'payment-submitted', decided: true, auto, nonce, authorizedAt: at };
  }

  private async sendUntilSent(c: PaymentContext, q: PaymentRequirements): Promise<void> {
    for (let delay = 1000; delay <= 32_000; delay *= 2) {
      try {
        return await this.sendPayment(c, q);
      } catch {
        await sleep(delay, undefined, { ref: false });
      }
    }
  }

  private async sendPayment(c: PaymentContext, q: PaymentRequirements): Promise<void> {
    const authorization = signAuthorization(this.parts.identity, {
      to: c.provider,
      amount: c.amount,
      asset: q.asset,
      network: q.network,
      taskId: c.task,
      quoteId: c.quoteId,
      nonce: c.nonce!,
      validBefore: c.validBefore!,
    });
    const payload = { x402Version: X402_VERSION, accepted: q, payload: { authorization: Buffer.from(authorization).toString('base64') } };
    const messenger = await this.parts.messenger();
    await messenger.send(
      c.provider,
      TASK_PAY,
      toBody({ task: c.task, [X402_STATUS]: 'payment-submitted', [X402_PAYLOAD]: JSON.stringify(payload) }),
      { ttlMs: MESSAGE_TTL_MS },
    );
  }

  /** The provider's final answer: what the hub did with the payment (journaled; the mark goes). */
  async settled(t: Payable, body: Record<string, unknown>): Promise<PaymentRecord | null> {
    const p = t.payment;
    if (!p) return null;
    let receipts: { success?: unknown; transaction?: unknown }[] = [];
    try {
      receipts = JSON.parse(String(body[X402_RECEIPTS] ?? '[]'));
    } catch {
      receipts = [];
    }
    const first = Array.isArray(receipts) ? receipts[0] : undefined;
    const captured = body[X402_STATUS] === 'payment-completed' && first?.success === true;
    const hubTx = typeof first?.transaction === 'string' ? first.transaction : null;
    if (p.quote) {
      const host = await this.parts.host();
      const actor = payment(host, t.to, t.task);
      const after = await actor.settled({ captured, hubTx: hubTx ?? '' }, [paying(actor)]);
      // An automatic payment that was not captured spent nothing: daily_max counts what was paid.
      if (!captured && after.context.auto) await autoSpend(host).undo(t.task);
    }
    // Also for a payment sent again after our restart, whose record never saw `payment-submitted`.
    return { ...p, status: captured ? 'payment-completed' : 'payment-failed', decided: true, hubTx, receipts };
  }

  /**
   * At start: payments authorized whose task had not ended are sent again (the same bytes), so a lost
   * answer is asked for again; those whose provider has not answered within UNANSWERED_MS of their end
   * of validity are given up (journaled, the mark goes) rather than sent at every start for ever.
   */
  async resend(): Promise<{ sent: { task: string; nonce: string; auto: boolean }[]; abandoned: string[] }> {
    const host = await this.parts.host();
    const sent: { task: string; nonce: string; auto: boolean }[] = [];
    const abandoned: string[] = [];
    for await (const [, mark] of this.parts.store.paying.iterator()) {
      const { task, to } = mark as PayingMark;
      const actor = payment(host, to, task);
      const v = await actor.state();
      if (v?.value !== 'authorized') continue;
      const c = v.context;
      const now = this.parts.now();
      if (unanswered(c, now)) {
        // Stamped with the time just checked, so the machine's guard sees the same instant (the mark goes
        // in the same batch).
        const after = await actor.abandon(now, [paying(actor)]);
        if (after.value === 'abandoned') abandoned.push(c.task);
        continue;
      }
      const rec = (await this.parts.store.tasks.get(c.task)) as { payment?: PaymentRecord | null } | undefined;
      const q = rec?.payment?.quote;
      if (!q) continue;
      await this.sendPayment(c, q).catch(() => {});
      sent.push({ task: c.task, nonce: c.nonce!, auto: c.auto ?? false });
    }
    return { sent, abandoned };
  }
}
