// libsodium through sodium-native (its binding for Node, prebuilt: nothing is compiled at install), for
// what node:crypto does slowly here: ChaCha20-Poly1305 into buffers the caller owns. node:crypto gives
// every cipher update a new output buffer, and at 64 MiB a file those fresh pages cost more than the
// cipher (measured in a new process: ~0.5 GB/s through node:crypto, ~1.3 GB/s this way, with ~300 page
// faults against ~8k). The functions are typed here rather than through @types/sodium-native, which
// lacks the IETF AEAD.
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
}

const sodium = createRequire(import.meta.url)('sodium-native') as Sodium;

/** RFC 8439 ChaCha20-Poly1305 of `plain` into `out` (exactly `plain.length` + 16 bytes: the ciphertext, then the tag). */
export function chachaSeal(out: Uint8Array, plain: Uint8Array, nonce: Uint8Array, key: Uint8Array): void {
  sodium.crypto_aead_chacha20poly1305_ietf_encrypt(out, plain, null, null, nonce, key);
}

/** Opens `sealed` (ciphertext ‖ tag) into `out` (exactly 16 bytes shorter); false, and `out` zeroed, when the tag does not check. */
export function chachaOpen(out: Uint8Array, sealed: Uint8Array, nonce: Uint8Array, key: Uint8Array): boolean {
  try {
    sodium.crypto_aead_chacha20poly1305_ietf_decrypt(out, null, sealed, null, nonce, key);
    return true;
  } catch {
    return false;
  }
}
