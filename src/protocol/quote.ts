// The provider's quote for a priced call (SPEC §10): the x402 v2 `PaymentRequired` shape, carried as
// task metadata `x402.payment.required`, and signed by the provider — a detached JWS over its RFC 8785
// canonical JSON with the kid `did:anet:<AID>#<ksn>` (as cards, WIRE §3.2) — so the caller, and later an
// audit, can tell exactly what the provider asked for. The hub never sees a quote.
import canonicalize from 'canonicalize';
import type { Identity } from '../identity/store.js';
import type { KelState } from '../identity/kel.js';
import { verify as verifyEd25519 } from '../identity/ed25519.js';
import { b64url, fromB64url } from './card/jws.js';
import { isAmount } from './authorization.js';

export const X402_VERSION = 2;
/** How long a quote stands (x402 `maxTimeoutSeconds`). */
export const QUOTE_SECONDS = 600;
export const ASSET = 'credit';

export interface PaymentRequirements {
  scheme: 'exact';
  network: string;
  asset: string;
  amount: string;
  payTo: string;
  maxTimeoutSeconds: number;
  extra: { skillId: string; taskId: string; quoteId: string };
}

export interface PaymentRequired {
  x402Version: number;
  accepts: PaymentRequirements[];
}

export function paymentRequired(q: {
  network: string;
  amount: string;
  payTo: string;
  skillId: string;
  taskId: string;
  quoteId: string;
}): PaymentRequired {
  return {
    x402Version: X402_VERSION,
    accepts: [
      {
        scheme: 'exact',
        network: q.network,
        asset: ASSET,
        amount: q.amount,
        payTo: q.payTo,
        maxTimeoutSeconds: QUOTE_SECONDS,
        extra: { skillId: q.skillId, taskId: q.taskId, quoteId: q.quoteId },
      },
    ],
  };
}

const header = (aid: string, ksn: number) => canonicalize({ alg: 'EdDSA', kid: `did:anet:${aid}#${ksn}`, typ: 'anet-quote' })!;

/** `<protected>..<signature>`: a JWS with detached payload (RFC 7515 Appendix F). */
export function signQuote(provider: Identity, required: PaymentRequired): string {
  const protectedB64 = b64url(header(provider.aid, provider.kel.ksn));
  const input = `${protectedB64}.${b64url(canonicalize(required)!)}`;
  return `${protectedB64}..${b64url(provider.signer.sign(Buffer.from(input)))}`;
}

export type QuoteCheck = { ok: true; quote: PaymentRequirements } | { ok: false; why: string };

/**
 * Checks a quote as the caller must before paying: signed by the provider's current key, for this task
 * and capability, payable to the provider, exact scheme, credits, a canonical amount.
 */
export function checkQuote(
  requiredJson: string,
  signature: string,
  expect: { kel: KelState; task: string; capability: string },
): QuoteCheck {
  let required: PaymentRequired;
  try {
    required = JSON.parse(requiredJson);
  } catch {
    return { ok: false, why: 'the quote is not JSON' };
  }
  const [protectedB64, empty, sigB64] = signature.split('.');
  const sig = sigB64 === undefined ? null : fromB64url(sigB64);
  if (empty !== '' || protectedB64 !== b64url(header(expect.kel.aid, expect.kel.ksn)) || !sig)
    return { ok: false, why: "the quote is not signed with the provider's current key" };
  const input = `${protectedB64}.${b64url(canonicalize(required) ?? '')}`;
  if (!verifyEd25519(expect.kel.currentKey, Buffer.from(input), sig)) return { ok: false, why: 'the quote signature does not verify' };
  const q = required?.accepts?.[0];
  if (required.x402Version !== X402_VERSION || required.accepts.length !== 1 || !q)
    return { ok: false, why: 'the quote is not an x402 v2 PaymentRequired with one option' };
  if (q.scheme !== 'exact' || q.asset !== ASSET || typeof q.network !== 'string' || !q.network.startsWith('hub:') || !isAmount(q.amount))
    return { ok: false, why: 'the quote is not an exact amount of credits on a hub ledger' };
  if (
    q.payTo !== expect.kel.aid ||
    q.extra?.taskId !== expect.task ||
    q.extra?.skillId !== expect.capability ||
    typeof q.extra?.quoteId !== 'string'
  ) {
    return { ok: false, why: 'the quote is for another payee, task or capability' };
  }
  return { ok: true, quote: q };
}
