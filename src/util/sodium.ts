// libsodium through sodium-native (its binding for Node, prebuilt: nothing is compiled at install), for
// what node:crypto does slowly here:
// - ChaCha20-Poly1305 into buffers the caller owns. node:crypto gives every cipher update a new output
//   buffer, and at 64 MiB a file those fresh pages cost more than the cipher (measured in a new process:
//   ~0.5 GB/s through node:crypto, ~1.3 GB/s this way, with ~300 page faults against ~8k); on a message,
//   ~1.8 µs against ~7.7 µs.
// - Ed25519 and X25519 on raw keys, with no OpenSSL key objects to build (measured, per operation: sign
//   22 µs against 33, verify 57 against 94, a new X25519 key 20 against 44, X25519 34 against 38).
// - HMAC-SHA256 for HPKE's key schedule (five per seal, five per open): node:crypto makes an OpenSSL MAC
//   context and a JS object for each (perf put createHmac at 4% of the provider's main thread in
//   bench/calls); two SHA-256 calls over reused buffers instead took a seal and an open from 140–155 µs
//   to 124–131 µs in a loop.
// The functions are typed here rather than through @types/sodium-native, which lacks the IETF AEAD.
import { createRequire } from 'node:module';

interface Sodium {
  crypto_aead_chacha20poly1305_ietf_encrypt(
    ciphertext: Uint8Array,
    message: Uint8Array,
    additionalData: Uint8Array | null,
    secretNonce: null,
    nonce: Uint8Array,
    key: Uint8Array,
  ): number;
  /** Throws when the tag does not check (`message` is zeroed then). */
  crypto_aead_chacha20poly1305_ietf_decrypt(
    message: Uint8Array,
    secretNonce: null,
    ciphertext: Uint8Array,
    additionalData: Uint8Array | null,
    nonce: Uint8Array,
    key: Uint8Array,
  ): number;
  crypto_sign_seed_keypair(publicKey: Uint8Array, secretKey: Uint8Array, seed: Uint8Array): void;
  crypto_sign_detached(signature: Uint8Array, message: Uint8Array, secretKey: Uint8Array): void;
  crypto_sign_verify_detached(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean;
  crypto_scalarmult_base(publicKey: Uint8Array, secretKey: Uint8Array): void;
  /** Throws when the result is all zero (a small-order public key). */
  crypto_scalarmult(shared: Uint8Array, secretKey: Uint8Array, publicKey: Uint8Array): void;
  crypto_hash_sha256(out: Uint8Array, message: Uint8Array): void;
}

const sodium = createRequire(import.meta.url)('sodium-native') as Sodium;

/**
 * RFC 8439 ChaCha20-Poly1305 of `plain` (with `aad`) into `out` (exactly `plain.length` + 16 bytes: the
 * ciphertext, then the tag).
 */
export function chachaSeal(out: Uint8Array, plain: Uint8Array, nonce: Uint8Array, key: Uint8Array, aad: Uint8Array | null = null): void {
  sodium.crypto_aead_chacha20poly1305_ietf_encrypt(out, plain, aad, null, nonce, key);
}

/**
 * Opens `sealed` (ciphertext ‖ tag, with `aad`) into `out` (exactly 16 bytes shorter); false, and `out`
 * zeroed, when the tag does not check.
 */
export function chachaOpen(
  out: Uint8Array,
  sealed: Uint8Array,
  nonce: Uint8Array,
  key: Uint8Array,
  aad: Uint8Array | null = null,
): boolean {
  try {
    sodium.crypto_aead_chacha20poly1305_ietf_decrypt(out, null, sealed, aad, nonce, key);
    return true;
  } catch {
    return false;
  }
}

/** An Ed25519 key pair from its 32-byte seed: the public key, and the 64-byte secret key libsodium signs with. */
export function ed25519FromSeed(seed: Uint8Array): { publicKey: Uint8Array; secretKey: Uint8Array } {
  const publicKey = new Uint8Array(32);
  const secretKey = new Uint8Array(64);
  sodium.crypto_sign_seed_keypair(publicKey, secretKey, seed);
  return { publicKey, secretKey };
}

/** The Ed25519 signature (RFC 8032, deterministic) of `message`. */
export function ed25519Sign(message: Uint8Array, secretKey: Uint8Array): Uint8Array {
  const signature = new Uint8Array(64);
  sodium.crypto_sign_detached(signature, message, secretKey);
  return signature;
}

/**
 * libsodium's Ed25519 check: besides the equation, it refuses a non-canonical S, a small-order R and a
 * public key that is non-canonical or of small order.
 */
export function ed25519Verify(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean {
  return sodium.crypto_sign_verify_detached(signature, message, publicKey);
}

/** The X25519 public key of a 32-byte private key (RFC 7748; the scalar is clamped inside). */
export function x25519Base(privateKey: Uint8Array): Uint8Array {
  const publicKey = new Uint8Array(32);
  sodium.crypto_scalarmult_base(publicKey, privateKey);
  return publicKey;
}

/** X25519(privateKey, publicKey); null for the all-zero value (a small-order public key). */
export function x25519(privateKey: Uint8Array, publicKey: Uint8Array): Uint8Array | null {
  const shared = new Uint8Array(32);
  try {
    sodium.crypto_scalarmult(shared, privateKey, publicKey);
  } catch {
    return null;
  }
  return shared;
}

const HMAC_BLOCK = 64;
const HMAC_KEY = 32;
/** (key ⊕ ipad) ‖ message, grown when a message needs it; and (key ⊕ opad) ‖ the inner digest. */
let hmacInner = new Uint8Array(HMAC_BLOCK + 256);
const hmacOuter = new Uint8Array(HMAC_BLOCK + 32);

/**
 * HMAC-SHA256 (RFC 2104) of the concatenated `parts` under a 32-byte key (every key HPKE's HKDF uses here
 * is one: a salt of zeros, a pseudorandom key, a shared secret). The key-derived bytes are zeroed after.
 */
export function hmacSha256(key: Uint8Array, parts: readonly Uint8Array[]): Uint8Array {
  if (key.length !== HMAC_KEY) throw new Error(`hmacSha256 takes a ${HMAC_KEY}-byte key, not ${key.length} bytes`);
  let length = HMAC_BLOCK;
  for (const part of parts) length += part.length;
  if (length > hmacInner.length) hmacInner = new Uint8Array(length);
  const inner = hmacInner;
  for (let i = 0; i < HMAC_KEY; i++) {
    inner[i] = key[i]! ^ 0x36;
    hmacOuter[i] = key[i]! ^ 0x5c;
  }
  inner.fill(0x36, HMAC_KEY, HMAC_BLOCK);
  hmacOuter.fill(0x5c, HMAC_KEY, HMAC_BLOCK);
  let at = HMAC_BLOCK;
  for (const part of parts) {
    inner.set(part, at);
    at += part.length;
  }
  const mac = new Uint8Array(32);
  sodium.crypto_hash_sha256(hmacOuter.subarray(HMAC_BLOCK), inner.subarray(0, at));
  sodium.crypto_hash_sha256(mac, hmacOuter);
  inner.fill(0, 0, at);
  hmacOuter.fill(0);
  return mac;
}
