// The caller's payment authorization (SPEC §10): `{from, to, amount, asset, network, taskId, quoteId,
// nonce, validBefore}` as CoreDet CBOR, signed by the payer's current key like a receipt (WIRE §5):
// `{1 document, 2 kid "did:anet:<AID>#<ksn>", 3 signature}`. The provider hands it to the hub, which
// holds the amount; the hub checks it against the payer's KEL. Amounts are canonical decimal strings
// (1..2^63−1, as in prices), so no side ever meets a float or a msgpackr bigint.
import { encodeCanonical, decodeMap, type CborValue } from '../identity/cbor.js';
import { cidOf } from '../identity/cid.js';
import { verify as verifyEd25519 } from '../identity/ed25519.js';
import type { Identity } from '../identity/store.js';
import type { KelState } from '../identity/kel.js';

export const MAX_AMOUNT = 2n ** 63n - 1n;
const CANONICAL_AMOUNT = /^[1-9][0-9]{0,18}$/;
const NONCE = /^[0-9a-f]{32}$/;

export interface Authorization {
  from: string;
  to: string;
  amount: string;
  asset: string;
  network: string;
  taskId: string;
  quoteId: string;
  /** 16 random bytes in hex: the hub's idempotency key for the hold. */
  nonce: string;
  /** Unix ms; the hub refuses to hold after it. */
  validBefore: number;
}

/** A canonical decimal amount from 1 to 2^63−1 (no sign, no leading zero, no exponent). */
export function isAmount(v: unknown): v is string {
  return typeof v === 'string' && CANONICAL_AMOUNT.test(v) && BigInt(v) <= MAX_AMOUNT;
}

const FIELDS = ['from', 'to', 'amount', 'asset', 'network', 'taskId', 'quoteId', 'nonce', 'validBefore'] as const;

export function signAuthorization(payer: Identity, a: Omit<Authorization, 'from'>): Uint8Array {
  const full: Authorization = { ...a, from: payer.aid };
  const doc = encodeCanonical(new Map<string, CborValue>(FIELDS.map((k) => [k, full[k]])));
  const kid = `did:anet:${payer.aid}#${payer.kel.ksn}`;
  return encodeCanonical(
    new Map<number, CborValue>([
      [1, doc],
      [2, kid],
      [3, payer.signer.sign(doc)],
    ]),
  );
}

export type AuthorizationRead = { ok: true; auth: Authorization; cid: string } | { ok: false; why: string };

/** Decodes an authorization without checking its signature (to learn `from`, whose KEL checks it). */
export function peekAuthorization(bytes: Uint8Array): AuthorizationRead {
  const outer = decodeMap(bytes);
  const doc = outer?.get(1);
  if (!(doc instanceof Uint8Array) || typeof outer!.get(2) !== 'string' || !(outer!.get(3) instanceof Uint8Array))
    return { ok: false, why: 'not a signed authorization' };
  const m = decodeMap(doc);
  if (!m || m.size !== FIELDS.length) return { ok: false, why: 'the authorization must have exactly its nine fields' };
  const a = Object.fromEntries(m) as unknown as Authorization;
  const texts = FIELDS.filter((k) => k !== 'validBefore');
  if (texts.some((k) => typeof a[k] !== 'string') || typeof a.validBefore !== 'number' || !Number.isSafeInteger(a.validBefore))
    return { ok: false, why: 'an authorization field has the wrong type' };
  if (!isAmount(a.amount)) return { ok: false, why: 'amount is not a canonical decimal from 1 to 2^63-1' };
  if (!NONCE.test(a.nonce)) return { ok: false, why: 'nonce must be 16 random bytes in hex' };
  return { ok: true, auth: a, cid: cidOf(doc) };
}

/** Decodes and checks the payer's signature against its KEL (current key only). */
export function readAuthorization(bytes: Uint8Array, payerKel: KelState): AuthorizationRead {
  const read = peekAuthorization(bytes);
  if (!read.ok) return read;
  const outer = decodeMap(bytes)!;
  const doc = outer.get(1) as Uint8Array;
  if (read.auth.from !== payerKel.aid) return { ok: false, why: 'the authorization is not from this payer' };
  if (outer.get(2) !== `did:anet:${payerKel.aid}#${payerKel.ksn}` || !verifyEd25519(payerKel.currentKey, doc, outer.get(3) as Uint8Array)) {
    return { ok: false, why: "not signed by the payer's current key" };
  }
  return read;
}
