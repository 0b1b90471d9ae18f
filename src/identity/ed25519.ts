// Ed25519 through libsodium (src/util/sodium.ts: native, far faster than pure JS, and on raw keys where
// node:crypto builds an OpenSSL key object), with the strict RFC 8032 checks made explicit here as well:
// canonical S (< L), a canonical R, and a public key that decodes strictly (RFC 8032 §5.1.3, through
// @noble/curves) and is not of small order — a small-order key makes one signature valid for every
// message. libsodium refuses a small-order R too. The signatures are RFC 8032's, byte for byte.
import { ed25519 } from '@noble/curves/ed25519.js';
import { randomBytes } from 'node:crypto';
import { ed25519FromSeed, ed25519Sign, ed25519Verify } from '../util/sodium.js';

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
  const { publicKey, secretKey } = ed25519FromSeed(seed);
  return { publicKey, sign: (message) => ed25519Sign(message, secretKey) };
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

/** Public keys checked already (valid or not), by their hex: a node verifies few keys, again and again. */
const keyCache = new Map<string, boolean>();

/** True for a public key that decodes strictly and is not of small order. */
export function isValidPublicKey(publicKey: Uint8Array): boolean {
  if (publicKey.length !== 32 || !isCanonicalPoint(publicKey)) return false;
  try {
    return !ed25519.Point.fromBytes(publicKey, false).isSmallOrder();
  } catch {
    return false;
  }
}

/** isValidPublicKey, remembered (its strict decoding in JS costs more than the signature check). */
function checkedKey(publicKey: Uint8Array): boolean {
  const id = Buffer.from(publicKey.buffer, publicKey.byteOffset, publicKey.byteLength).toString('hex');
  let valid = keyCache.get(id);
  if (valid === undefined) {
    valid = isValidPublicKey(publicKey);
    if (keyCache.size >= 1024) keyCache.clear();
    keyCache.set(id, valid);
  }
  return valid;
}

/** Strict verification: wrong lengths, S ≥ L, non-canonical R, or an invalid or small-order key are refused. */
export function verify(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean {
  if (publicKey.length !== 32 || signature.length !== 64) return false;
  if (littleEndian(signature.subarray(32)) >= L) return false;
  if (!isCanonicalPoint(signature.subarray(0, 32))) return false;
  if (!checkedKey(publicKey)) return false;
  return ed25519Verify(publicKey, message, signature);
}
