// Contact-level delivery credentials (SPEC §7): `{iss, sub, level: "contact", iat, exp}` with exp = iat +
// 30 days, signed with the issuer's current key. The provider carries one in its replies to a peer on its
// allow or trust list; the peer keeps it and may then fetch the provider's extended card (§6.1).
import { encodeCanonical, decodeMap, type CborValue } from '../identity/cbor.js';
import { verify as verifyEd25519 } from '../identity/ed25519.js';
import type { Identity } from '../identity/store.js';
import type { KelState } from '../identity/kel.js';
import type { Store } from '../../store/db.js';

export const CREDENTIAL_MS = 30 * 24 * 3_600_000;

export interface Credential {
  iss: string;
  sub: string;
  level: 'contact';
  iat: number;
  exp: number;
  /** The issuer's establishment event whose key signed it. */
  ksn: number;
}

function docMap(c: Credential): Map<string, CborValue> {
  return new Map<string, CborValue>([
    ['iss', c.iss],
    ['sub', c.sub],
    ['level', c.level],
    ['iat', c.iat],
    ['exp', c.exp],
    ['ksn', c.ksn],
  ]);
}

/** `{1 document, 2 signature}` as CoreDet CBOR. */
export function issueCredential(issuer: Identity, sub: string, now: number): Uint8Array {
  const doc = docMap({ iss: issuer.aid, sub, level: 'contact', iat: now, exp: now + CREDENTIAL_MS, ksn: issuer.kel.ksn });
  return encodeCanonical(
    new Map<number, CborValue>([
      [1, doc],
      [2, issuer.signer.sign(encodeCanonical(doc))],
    ]),
  );
}

export type CredentialCheck = { ok: true; credential: Credential } | { ok: false; why: string };

/** Valid when it names `iss` and `sub`, is unexpired at `now`, and is signed by the issuer's current key. */
export function checkCredential(bytes: Uint8Array, expect: { iss: string; sub: string; kel: KelState; now: number }): CredentialCheck {
  const outer = decodeMap(bytes);
  if (!outer) return { ok: false, why: 'not a CoreDet CBOR map' };
  const doc = outer.get(1);
  const sig = outer.get(2);
  if (!(doc instanceof Map) || !(sig instanceof Uint8Array)) return { ok: false, why: 'not a signed credential' };
  const c = Object.fromEntries(doc) as Record<string, unknown>;
  const uint = (v: unknown) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
  if (
    doc.size !== 6 ||
    c.level !== 'contact' ||
    typeof c.iss !== 'string' ||
    typeof c.sub !== 'string' ||
    !uint(c.iat) ||
    !uint(c.exp) ||
    !uint(c.ksn)
  ) {
    return { ok: false, why: 'not a contact-level credential' };
  }
  const cred = c as unknown as Credential;
  if (cred.iss !== expect.iss || cred.sub !== expect.sub) return { ok: false, why: 'issued by or to another AID' };
  if (cred.exp !== cred.iat + CREDENTIAL_MS) return { ok: false, why: 'its lifetime is not 30 days' };
  if (expect.now >= cred.exp) return { ok: false, why: 'expired' };
  if (cred.ksn !== expect.kel.ksn || !verifyEd25519(expect.kel.currentKey, encodeCanonical(doc), sig)) {
    return { ok: false, why: "not signed by the issuer's current key" };
  }
  return { ok: true, credential: cred };
}

/** The credentials this node holds, by issuer. */
export class Contacts {
  constructor(private readonly store: Store) {}

  async keep(iss: string, bytes: Uint8Array): Promise<void> {
    await this.store.contacts.put(iss, bytes);
  }

  async forget(iss: string): Promise<void> {
    // Most replies come from providers that never gave us one: a synchronous read that misses costs
    // microseconds, against a write's thread-pool round trip before the caller hears its answer.
    if (this.store.contacts.getSync(iss) === undefined) return;
    await this.store.contacts.del(iss);
  }

  async held(iss: string): Promise<Uint8Array | undefined> {
    const v = (await this.store.contacts.get(iss)) as Uint8Array | undefined;
    return v ? new Uint8Array(v) : undefined;
  }
}

export interface IssuedRecord {
  ksn: number;
  iat: number;
  exp: number;
}

/** Remembers that `sub` holds a credential issued now (so a key rotation can renew it). */
export async function recordIssued(store: Store, issuer: Identity, sub: string, now: number): Promise<void> {
  const rec: IssuedRecord = { ksn: issuer.kel.ksn, iat: now, exp: now + CREDENTIAL_MS };
  await store.issued.put(sub, rec);
}

/** Issues a credential to `sub` and remembers it. */
export async function issueAndRecord(store: Store, issuer: Identity, sub: string, now: number): Promise<Uint8Array> {
  const bytes = issueCredential(issuer, sub, now);
  await recordIssued(store, issuer, sub, now);
  return bytes;
}

/** The peers holding an unexpired credential of ours signed by a key we have since rotated away. */
export async function signedByOldKey(store: Store, issuer: Identity, now: number): Promise<string[]> {
  const out: string[] = [];
  for await (const [sub, rec] of store.issued.iterator()) {
    const r = rec as IssuedRecord;
    if (r.exp <= now) await store.issued.del(sub);
    else if (r.ksn !== issuer.kel.ksn) out.push(sub);
  }
  return out;
}
