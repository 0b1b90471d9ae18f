// Encryption keys (WIRE §4): X25519 keys apart from the signing key, published as a set signed by the
// identity's current key; a new key every 7 days, each valid for 14. Private halves stay in
// `keys/enc.cbor` (0600) in the data dir.
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { encodeCanonical, decodeCanonical, type CborValue } from '../identity/cbor.js';
import { verify as verifyEd25519 } from '../identity/ed25519.js';
import type { Identity } from '../identity/store.js';
import type { KelState } from '../identity/kel.js';
import { generateX25519, type X25519KeyPair } from './hpke.js';
import { writeFileAtomic, isNotFound, ensureDir } from '../fsutil.js';

export const NEW_KEY_EVERY_MS = 7 * 24 * 3_600_000;
export const KEY_VALID_MS = 14 * 24 * 3_600_000;

export interface EncryptionKey extends X25519KeyPair {
  kid: Uint8Array;
  notBefore: number;
  notAfter: number;
}

export interface PublicEncryptionKey {
  kid: Uint8Array;
  publicKey: Uint8Array;
  notBefore: number;
  notAfter: number;
}

const path = (dataDir: string) => join(dataDir, 'keys', 'enc.cbor');

async function loadKeys(dataDir: string): Promise<EncryptionKey[]> {
  let bytes: Uint8Array;
  try {
    bytes = await readFile(path(dataDir));
  } catch (err) {
    if (isNotFound(err)) return [];
    throw err;
  }
  const list = decodeCanonical(bytes) as Map<number, CborValue>[];
  return list.map((m) => ({
    kid: m.get(1) as Uint8Array,
    privateKey: m.get(2) as Uint8Array,
    publicKey: m.get(3) as Uint8Array,
    notBefore: m.get(4) as number,
    notAfter: m.get(5) as number,
  }));
}

async function saveKeys(dataDir: string, keys: EncryptionKey[]): Promise<void> {
  const list = keys.map((k) => new Map<number, CborValue>([[1, k.kid], [2, k.privateKey], [3, k.publicKey], [4, k.notBefore], [5, k.notAfter]]));
  await ensureDir(join(dataDir, 'keys'), 0o700);
  await writeFileAtomic(path(dataDir), encodeCanonical(list), 0o600);
}

/** The keys valid now, adding a new one when the newest is 7 days old; expired ones are erased. */
export async function currentKeys(dataDir: string, now: number): Promise<{ keys: EncryptionKey[]; changed: boolean }> {
  const stored = await loadKeys(dataDir);
  const keys = stored.filter((k) => k.notAfter > now);
  const newest = Math.max(-Infinity, ...keys.map((k) => k.notBefore));
  let changed = keys.length !== stored.length;
  if (!(newest > now - NEW_KEY_EVERY_MS)) {
    keys.push({ ...generateX25519(), kid: new Uint8Array(randomBytes(16)), notBefore: now, notAfter: now + KEY_VALID_MS });
    changed = true;
  }
  if (changed) await saveKeys(dataDir, keys);
  return { keys, changed };
}

function setMap(aid: string, ksn: number, keys: PublicEncryptionKey[]): Map<number, CborValue> {
  const list = keys.map((k) => new Map<number, CborValue>([[1, k.kid], [2, k.publicKey], [3, k.notBefore], [4, k.notAfter]]));
  return new Map<number, CborValue>([[1, aid], [2, ksn], [3, list]]);
}

/** The published set: `{1 set, 2 sig}`, the set signed by the identity's current key. */
export function signKeySet(identity: Identity, keys: PublicEncryptionKey[]): Uint8Array {
  const set = setMap(identity.aid, identity.kel.ksn, keys);
  return encodeCanonical(new Map<number, CborValue>([[1, set], [2, identity.signer.sign(encodeCanonical(set))]]));
}

/** The keys of a signed set that are valid at `now`, newest first; throws when the set does not verify. */
export function verifyKeySet(bytes: Uint8Array, kel: KelState, now: number): PublicEncryptionKey[] {
  const outer = decodeCanonical(bytes);
  const set = outer instanceof Map ? (outer.get(1) as Map<number, CborValue> | undefined) : undefined;
  const sig = outer instanceof Map ? outer.get(2) : undefined;
  if (!(set instanceof Map) || !(sig instanceof Uint8Array)) throw new Error('not a signed key set');
  if (set.get(1) !== kel.aid) throw new Error('the key set is another AID\'s');
  if (set.get(2) !== kel.ksn || !verifyEd25519(kel.currentKey, encodeCanonical(set), sig)) throw new Error('the key set is not signed by the AID\'s current key');
  const list = set.get(3) as Map<number, CborValue>[];
  return list
    .map((m) => ({ kid: m.get(1) as Uint8Array, publicKey: m.get(2) as Uint8Array, notBefore: m.get(3) as number, notAfter: m.get(4) as number }))
    .filter((k) => k.kid?.length === 16 && k.publicKey?.length === 32 && k.notBefore <= now && now < k.notAfter)
    .sort((a, b) => b.notBefore - a.notBefore);
}
