// Receipts (SPEC §9.4, WIRE §5): `{task, capability, caller, provider, result_hash, amount?, hub_tx?, at}`
// as CoreDet CBOR, signed by the provider's current key (kid `did:anet:<AID>#<ksn>`), identified by the
// CID of the receipt's bytes. `result_hash` is sha2-256 of the result's RFC 8785 canonical JSON.
import { sha256 } from '@noble/hashes/sha2.js';
import canonicalize from 'canonicalize';
import { encodeCanonical, decodeMap, type CborValue } from '../identity/cbor.js';
import { cidOf } from '../identity/cid.js';
import { verify as verifyEd25519 } from '../identity/ed25519.js';
import type { Identity } from '../identity/store.js';
import type { KelState } from '../identity/kel.js';

export interface Receipt {
  task: string;
  capability: string;
  caller: string;
  provider: string;
  result_hash: Uint8Array;
  /** A paid call's captured amount (canonical decimal credits) and the hub's transaction id. */
  amount?: string;
  hub_tx?: string;
  at: number;
}

export function resultHash(result: unknown): Uint8Array {
  return sha256(new TextEncoder().encode(canonicalize(result)!));
}

const receiptMap = (r: Receipt) =>
  new Map<string, CborValue>([
    ['task', r.task],
    ['capability', r.capability],
    ['caller', r.caller],
    ['provider', r.provider],
    ['result_hash', r.result_hash],
    ['at', r.at],
    ...(r.amount !== undefined ? [['amount', r.amount] as [string, CborValue]] : []),
    ...(r.hub_tx !== undefined ? [['hub_tx', r.hub_tx] as [string, CborValue]] : []),
  ]);

/** `{1 receipt, 2 kid, 3 signature}` as CoreDet CBOR, and the receipt's CID. */
export function signReceipt(provider: Identity, r: Omit<Receipt, 'provider'>): { bytes: Uint8Array; cid: string } {
  const doc = encodeCanonical(receiptMap({ ...r, provider: provider.aid }));
  const kid = `did:anet:${provider.aid}#${provider.kel.ksn}`;
  const bytes = encodeCanonical(
    new Map<number, CborValue>([
      [1, doc],
      [2, kid],
      [3, provider.signer.sign(doc)],
    ]),
  );
  return { bytes, cid: cidOf(doc) };
}

export type ReceiptCheck = { ok: true; receipt: Receipt; cid: string } | { ok: false; why: string };

/** Checks a receipt against the provider's KEL, the task it answers and the result it came with. */
export function checkReceipt(
  bytes: Uint8Array,
  expect: { kel: KelState; task: string; caller: string; capability: string; result: unknown; amount?: string; hubTx?: string },
): ReceiptCheck {
  const outer = decodeMap(bytes);
  if (!outer) return { ok: false, why: 'not a CoreDet CBOR map' };
  const doc = outer.get(1);
  const kid = outer.get(2);
  const sig = outer.get(3);
  if (!(doc instanceof Uint8Array) || typeof kid !== 'string' || !(sig instanceof Uint8Array))
    return { ok: false, why: 'not a signed receipt' };
  if (kid !== `did:anet:${expect.kel.aid}#${expect.kel.ksn}` || !verifyEd25519(expect.kel.currentKey, doc, sig)) {
    return { ok: false, why: "not signed by the provider's current key" };
  }
  const m = decodeMap(doc);
  const r = m ? (Object.fromEntries(m) as unknown as Receipt) : null;
  if (!r || r.provider !== expect.kel.aid || r.task !== expect.task || r.caller !== expect.caller || r.capability !== expect.capability) {
    return { ok: false, why: 'issued for another task, capability, caller or provider' };
  }
  if (!(r.result_hash instanceof Uint8Array) || Buffer.compare(Buffer.from(r.result_hash), Buffer.from(resultHash(expect.result))) !== 0) {
    return { ok: false, why: 'the result does not match its hash' };
  }
  // A paid call's receipt names what was captured, and the hub transaction the caller was told of.
  if (r.amount !== expect.amount || r.hub_tx !== expect.hubTx)
    return { ok: false, why: 'the amount or hub transaction differs from the settlement' };
  return { ok: true, receipt: r, cid: cidOf(doc) };
}
