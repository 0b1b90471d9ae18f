// The encryption key set's wire format (WIRE §4): a node's X25519 keys, apart from its signing key, as
// `{1 set, 2 sig}`, the set `{1 aid, 2 ksn, 3 [{1 kid, 2 public key, 3 notBefore, 4 notAfter}]}` signed by
// the identity's current key. The node makes and publishes it (src/relay/keyset.ts keeps the private
// halves); the hub checks it on entry and readers check it again against their own copy of the KEL.
import { encodeCanonical, decodeCanonical, type CborValue } from '../identity/cbor.js';
import { verify as verifyEd25519 } from '../identity/ed25519.js';
import type { Identity } from '../identity/store.js';
import type { KelState } from '../identity/kel.js';

export interface PublicEncryptionKey {
  kid: Uint8Array;
  publicKey: Uint8Array;
  notBefore: number;
  notAfter: number;
}

function setMap(aid: string, ksn: number, keys: PublicEncryptionKey[]): Map<number, CborValue> {
  const list = keys.map(
    (k) =>
      new Map<number, CborValue>([
        [1, k.kid],
        [2, k.publicKey],
        [3, k.notBefore],
        [4, k.notAfter],
      ]),
  );
  return new Map<number, CborValue>([
    [1, aid],
    [2, ksn],
    [3, list],
  ]);
}

/** The published set: `{1 set, 2 sig}`, the set signed by the identity's current key. */
export function signKeySet(identity: Identity, keys: PublicEncryptionKey[]): Uint8Array {
  const set = setMap(identity.aid, identity.kel.ksn, keys);
  return encodeCanonical(
    new Map<number, CborValue>([
      [1, set],
      [2, identity.signer.sign(encodeCanonical(set))],
    ]),
  );
}

/** The keys of a signed set that are valid at `now`, newest first; throws when the set does not verify. */
export function verifyKeySet(bytes: Uint8Array, kel: KelState, now: number): PublicEncryptionKey[] {
  const outer = decodeCanonical(bytes);
  const set = outer instanceof Map ? (outer.get(1) as Map<number, CborValue> | undefined) : undefined;
  const sig = outer instanceof Map ? outer.get(2) : undefined;
  if (!(set instanceof Map) || !(sig instanceof Uint8Array)) throw new Error('not a signed key set');
  if (set.get(1) !== kel.aid) throw new Error("the key set is another AID's");
  if (set.get(2) !== kel.ksn || !verifyEd25519(kel.currentKey, encodeCanonical(set), sig))
    throw new Error("the key set is not signed by the AID's current key");
  const list = set.get(3) as Map<number, CborValue>[];
  return list
    .map((m) => ({
      kid: m.get(1) as Uint8Array,
      publicKey: m.get(2) as Uint8Array,
      notBefore: m.get(3) as number,
      notAfter: m.get(4) as number,
    }))
    .filter((k) => k.kid?.length === 16 && k.publicKey?.length === 32 && k.notBefore <= now && now < k.notAfter)
    .sort((a, b) => b.notBefore - a.notBefore);
}
