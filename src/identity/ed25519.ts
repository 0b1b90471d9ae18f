// Ed25519 on node:crypto (native, far faster than pure JS), with the strict RFC 8032 checks that
// OpenSSL leaves out made explicit: canonical S (< L), a canonical R, and a public key that decodes
// strictly (RFC 8032 §5.1.3, through @noble/curves) and is not of small order — a small-order key makes
// one signature valid for every message.
import { ed25519 } from '@noble/curves/ed25519.js';
import { createPrivateKey, createPublicKey, sign as nodeSign, verify as nodeVerify, randomBytes, type KeyObject } from 'node:crypto';

const PKCS8_SEED_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
const L = (1n << 252n) + 27742317777372353535851937790883648493n;
const P = (1n << 255n) - 19n;

export interface Signer {
  readonly publicKey: Uint8Array;
  sign(message: Uint8Array): Uint8Array;
}

export function newSeed(): Uint8Array {
  return new Uint8Array(randomBytes(32));
}

export function signerFromSeed(seed: Uint8Array): Signer {
  if (seed.length !== 32) throw new Error('an Ed25519 seed is 32 bytes');
  const key = createPrivateKey({ key: Buffer.concat([PKCS8_SEED_PREFIX, seed]), format: 'der', type: 'pkcs8' });
  const spki = createPublicKey(key).export({ format: 'der', type: 'spki' });
  const publicKey = new Uint8Array(spki.subarray(SPKI_PREFIX.length));
  return { publicKey, sign: (message) => new Uint8Array(nodeSign(null, message, key)) };
}

function littleEndian(bytes: Uint8Array): bigint {
  let n = 0n;
  for (let i = bytes.length - 1; i >= 0; i--) n = (n << 8n) | BigInt(bytes[i]!);
  return n;
}

function isCanonicalPoint(encoded: Uint8Array): boolean {
  const y = littleEndian(encoded) & ((1n << 255n) - 1n);
  return y < P;
}

const keyCache = new Map<string, KeyObject | null>();

/** True for a public key that decodes strictly and is not of small order. */
export function isValidPublicKey(publicKey: Uint8Array): boolean {
  if (publicKey.length !== 32 || !isCanonicalPoint(publicKey)) return false;
  try {
    return !ed25519.Point.fromBytes(publicKey, false).isSmallOrder();
  } catch {
    return false;
  }
}

/** The native key for a valid public key, null for an invalid one (both cached). */
function publicKeyObject(publicKey: Uint8Array): KeyObject | null {
  const id = Buffer.from(publicKey).toString('hex');
  let key = keyCache.get(id);
  if (key === undefined) {
    key = isValidPublicKey(publicKey)
      ? createPublicKey({ key: Buffer.concat([SPKI_PREFIX, publicKey]), format: 'der', type: 'spki' })
      : null;
    if (keyCache.size >= 1024) keyCache.clear();
    keyCache.set(id, key);
  }
  return key;
}

/** Strict verification: wrong lengths, S ≥ L, non-canonical R, or an invalid or small-order key are refused. */
export function verify(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean {
  if (publicKey.length !== 32 || signature.length !== 64) return false;
  if (littleEndian(signature.subarray(32)) >= L) return false;
  if (!isCanonicalPoint(signature.subarray(0, 32))) return false;
  const key = publicKeyObject(publicKey);
  if (!key) return false;
  try {
    return nodeVerify(null, message, key, signature);
  } catch {
    return false;
  }
}
