// HPKE (RFC 9180) Base mode with DHKEM(X25519, HKDF-SHA256), HKDF-SHA256 and ChaCha20-Poly1305 — the one
// suite of WIRE.md §4 — assembled from native primitives as WIRE.md allows: X25519 and ChaCha20-Poly1305
// from libsodium (src/util/sodium.ts: on raw keys, where node:crypto builds an OpenSSL key object for each
// key and a new buffer for each update), and HMAC-SHA256 on libsodium's SHA-256. The pure-JS HPKE library
// measured ~5 ms per seal+open here (its X25519 is JavaScript); this ~0.13 ms. Tests check
// interoperability with @hpke/core in both directions.
import { randomBytes } from 'node:crypto';
import { chachaOpen, chachaSeal, hmacSha256, x25519, x25519Base } from '../util/sodium.js';

const KEM_ID = 0x0020;
const KDF_ID = 0x0001;
const AEAD_ID = 0x0003;
const MODE_BASE = 0x00;
const N_SECRET = 32;
const N_K = 32;
const N_N = 12;

const te = new TextEncoder();
const i2osp = (n: number, len: number) => {
  const out = new Uint8Array(len);
  for (let i = len - 1, v = n; i >= 0; i--, v = Math.floor(v / 256)) out[i] = v & 0xff;
  return out;
};
const concat = (...parts: Uint8Array[]) => new Uint8Array(Buffer.concat(parts));

const KEM_SUITE = concat(te.encode('KEM'), i2osp(KEM_ID, 2));
const HPKE_SUITE = concat(te.encode('HPKE'), i2osp(KEM_ID, 2), i2osp(KDF_ID, 2), i2osp(AEAD_ID, 2));
const V1 = te.encode('HPKE-v1');

// HKDF-SHA256 (RFC 5869). Extract: HMAC(salt, ikm), an empty salt being 32 zero bytes. Expand, for the
// at most 32 bytes this suite ever asks: the first block, HMAC(prk, info || 0x01).
const ZERO_SALT = new Uint8Array(32);
const hmac = (key: Uint8Array, ...data: Uint8Array[]) => hmacSha256(key, data);

function labeledExtract(suite: Uint8Array, salt: Uint8Array, label: string, ikm: Uint8Array): Uint8Array {
  return hmac(salt.length ? salt : ZERO_SALT, V1, suite, te.encode(label), ikm);
}

function labeledExpand(suite: Uint8Array, prk: Uint8Array, label: string, info: Uint8Array, length: number): Uint8Array {
  if (length > 32) throw new Error('this HKDF-Expand serves at most one SHA-256 block');
  return hmac(prk, i2osp(length, 2), V1, suite, te.encode(label), info, Uint8Array.of(1)).subarray(0, length);
}

export interface X25519KeyPair {
  privateKey: Uint8Array;
  publicKey: Uint8Array;
}

export function generateX25519(): X25519KeyPair {
  const privateKey = new Uint8Array(randomBytes(32));
  return { privateKey, publicKey: x25519Base(privateKey) };
}

export function x25519PublicOf(privateKey: Uint8Array): Uint8Array {
  return x25519Base(privateKey);
}

function dh(privateKey: Uint8Array, publicKey: Uint8Array): Uint8Array {
  if (publicKey.length !== 32) throw new Error('an X25519 public key is 32 bytes');
  // RFC 9180 §7.1.4: an all-zero shared secret (a small-order public key) must be refused.
  const shared = x25519(privateKey, publicKey);
  if (!shared) throw new Error('X25519 produced the all-zero value (a small-order public key)');
  return shared;
}

function extractAndExpand(dhValue: Uint8Array, kemContext: Uint8Array): Uint8Array {
  const eaePrk = labeledExtract(KEM_SUITE, new Uint8Array(), 'eae_prk', dhValue);
  return labeledExpand(KEM_SUITE, eaePrk, 'shared_secret', kemContext, N_SECRET);
}

const EMPTY = new Uint8Array();
const PSK_ID_HASH = labeledExtract(HPKE_SUITE, EMPTY, 'psk_id_hash', EMPTY);
// key_schedule_context depends on the info only, and a node seals to and opens with few infos (one per
// recipient key): remembered, bounded.
const contexts = new Map<string, Uint8Array>();

function scheduleContext(info: Uint8Array): Uint8Array {
  const id = Buffer.from(info.buffer, info.byteOffset, info.byteLength).toString('base64');
  let context = contexts.get(id);
  if (!context) {
    context = concat(Uint8Array.of(MODE_BASE), PSK_ID_HASH, labeledExtract(HPKE_SUITE, EMPTY, 'info_hash', info));
    if (contexts.size >= 1024) contexts.clear();
    contexts.set(id, context);
  }
  return context;
}

function keySchedule(sharedSecret: Uint8Array, info: Uint8Array): { key: Uint8Array; baseNonce: Uint8Array } {
  const context = scheduleContext(info);
  const secret = labeledExtract(HPKE_SUITE, sharedSecret, 'secret', EMPTY);
  return {
    key: labeledExpand(HPKE_SUITE, secret, 'key', context, N_K),
    baseNonce: labeledExpand(HPKE_SUITE, secret, 'base_nonce', context, N_N),
  };
}

/**
 * Ephemeral keys are made ahead, when the event loop gets to it (setImmediate), so a seal on a call's
 * critical path does not wait for one. Each leaves the pool once and is never used again (RFC 9180: a
 * fresh key per encapsulation); with the pool empty, a seal makes its own.
 */
const SPARE_EPHEMERAL = 2;
const spareEphemeral: X25519KeyPair[] = [];
let refilling = false;

function takeEphemeral(): X25519KeyPair {
  const key = spareEphemeral.pop() ?? generateX25519();
  if (!refilling) {
    refilling = true;
    setImmediate(() => {
      refilling = false;
      while (spareEphemeral.length < SPARE_EPHEMERAL) spareEphemeral.push(generateX25519());
    }).unref();
  }
  return key;
}

/** Single-shot seal (sequence number 0): returns the encapsulated key and the ciphertext with its tag. */
export function seal(
  recipientPublicKey: Uint8Array,
  info: Uint8Array,
  aad: Uint8Array,
  plaintext: Uint8Array,
  ephemeral?: X25519KeyPair,
): { enc: Uint8Array; ct: Uint8Array } {
  const { privateKey, publicKey: enc } = ephemeral ?? takeEphemeral();
  const shared = extractAndExpand(dh(privateKey, recipientPublicKey), concat(enc, recipientPublicKey));
  const { key, baseNonce } = keySchedule(shared, info);
  const ct = new Uint8Array(plaintext.length + 16);
  chachaSeal(ct, plaintext, baseNonce, key, aad);
  return { enc, ct };
}

/** Single-shot open; throws when the ciphertext does not authenticate. */
export function open(recipient: X25519KeyPair, info: Uint8Array, aad: Uint8Array, enc: Uint8Array, ct: Uint8Array): Uint8Array {
  if (ct.length < 16) throw new Error('HPKE ciphertext too short');
  const shared = extractAndExpand(dh(recipient.privateKey, enc), concat(enc, recipient.publicKey));
  const { key, baseNonce } = keySchedule(shared, info);
  const plain = new Uint8Array(ct.length - 16);
  if (!chachaOpen(plain, ct, baseNonce, key, aad)) throw new Error('HPKE ciphertext does not authenticate');
  return plain;
}
