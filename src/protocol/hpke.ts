// HPKE (RFC 9180) Base mode with DHKEM(X25519, HKDF-SHA256), HKDF-SHA256 and ChaCha20-Poly1305 — the one
// suite of WIRE.md §4 — assembled from node:crypto primitives as WIRE.md allows. The pure-JS HPKE library
// measured ~5 ms per seal+open here (its X25519 is JavaScript); native X25519 and ChaCha20-Poly1305 make
// it well under a millisecond. Tests check interoperability with @hpke/core in both directions.
import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  createPrivateKey,
  createPublicKey,
  diffieHellman,
  generateKeyPairSync,
  type KeyObject,
} from 'node:crypto';

const KEM_ID = 0x0020;
const KDF_ID = 0x0001;
const AEAD_ID = 0x0003;
const MODE_BASE = 0x00;
const N_SECRET = 32;
const N_K = 32;
const N_N = 12;
const PKCS8_X25519 = Buffer.from('302e020100300506032b656e04220420', 'hex');
const SPKI_X25519 = Buffer.from('302a300506032b656e032100', 'hex');

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

// HKDF-SHA256 (RFC 5869) on node's native HMAC. Extract: HMAC(salt, ikm), an empty salt being 32 zero
// bytes. Expand, for the at most 32 bytes this suite ever asks: the first block, HMAC(prk, info || 0x01).
const ZERO_SALT = new Uint8Array(32);
const hmac = (key: Uint8Array, ...data: Uint8Array[]) => {
  const h = createHmac('sha256', key);
  for (const d of data) h.update(d);
  return new Uint8Array(h.digest());
};

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

// Parsing a private key from DER costs ~0.3 ms in OpenSSL: keep the parsed key with the raw bytes.
const privateKeyObjects = new WeakMap<Uint8Array, KeyObject>();

function privateKeyObject(privateKey: Uint8Array): KeyObject {
  let key = privateKeyObjects.get(privateKey);
  if (!key) {
    key = createPrivateKey({ key: Buffer.concat([PKCS8_X25519, privateKey]), format: 'der', type: 'pkcs8' });
    privateKeyObjects.set(privateKey, key);
  }
  return key;
}

export function generateX25519(): X25519KeyPair {
  const { privateKey, publicKey } = generateKeyPairSync('x25519');
  const raw = new Uint8Array(privateKey.export({ format: 'der', type: 'pkcs8' }).subarray(PKCS8_X25519.length));
  privateKeyObjects.set(raw, privateKey);
  return { privateKey: raw, publicKey: new Uint8Array(publicKey.export({ format: 'der', type: 'spki' }).subarray(SPKI_X25519.length)) };
}

export function x25519PublicOf(privateKey: Uint8Array): Uint8Array {
  return new Uint8Array(createPublicKey(privateKeyObject(privateKey)).export({ format: 'der', type: 'spki' }).subarray(SPKI_X25519.length));
}

// A recipient's public key is parsed once (peers' keys are few and reused); ephemeral ones are not cached.
// Raw keys go in and out as JWK: OpenSSL 3 spends ~150 µs decoding (and ~120 µs encoding) an SPKI DER
// key, against ~20 µs (2 µs) for the same 32 bytes as a JWK — on every envelope sealed and opened.
const publicKeyObjects = new Map<string, KeyObject>();

function publicKeyObject(publicKey: Uint8Array, cache: boolean): KeyObject {
  const x = Buffer.from(publicKey.buffer, publicKey.byteOffset, publicKey.byteLength).toString('base64url');
  const hit = cache ? publicKeyObjects.get(x) : undefined;
  if (hit) return hit;
  const key = createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x }, format: 'jwk' });
  if (cache) {
    if (publicKeyObjects.size >= 1024) publicKeyObjects.clear();
    publicKeyObjects.set(x, key);
  }
  return key;
}

function dh(privateKey: Uint8Array | KeyObject, publicKey: Uint8Array, cachePublic: boolean): Uint8Array {
  if (publicKey.length !== 32) throw new Error('an X25519 public key is 32 bytes');
  let out: Buffer;
  try {
    out = diffieHellman({
      privateKey: privateKey instanceof Uint8Array ? privateKeyObject(privateKey) : privateKey,
      publicKey: publicKeyObject(publicKey, cachePublic),
    });
  } catch {
    // OpenSSL refuses to derive the all-zero value itself.
    out = Buffer.alloc(32);
  }
  // RFC 9180 §7.1.4: an all-zero shared secret (a small-order public key) must be refused.
  if (out.every((b) => b === 0)) throw new Error('X25519 produced the all-zero value (a small-order public key)');
  return new Uint8Array(out);
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
 * critical path does not wait ~50 µs for one. Each leaves the pool once and is never used again (RFC 9180:
 * a fresh key per encapsulation); with the pool empty, a seal makes its own. A fresh key stays a
 * KeyObject: only its public half is ever needed as bytes.
 */
const SPARE_EPHEMERAL = 2;
const spareEphemeral: { privateKey: KeyObject; enc: Uint8Array }[] = [];
let refilling = false;

function freshEphemeral(): { privateKey: KeyObject; enc: Uint8Array } {
  // The public half comes out of the key generation itself as a JWK, never as a KeyObject exported
  // afterwards: on Node 20, `export({ format: 'jwk' })` of a key fresh from generateKeyPairSync holds the
  // key's mutex while it allocates; a GC there that collects the generating job locks that mutex again
  // from the same thread, and the process hangs for good (seen in bench/hub, gdb: ~KeyGenJob under ExportJWKEdKey).
  // (@types/node has no overload for a JWK public half: the key pair is typed here.)
  const { privateKey, publicKey } = generateKeyPairSync('x25519', { publicKeyEncoding: { format: 'jwk' } }) as unknown as {
    privateKey: KeyObject;
    publicKey: { x: string };
  };
  return { privateKey, enc: new Uint8Array(Buffer.from(publicKey.x, 'base64url')) };
}

function takeEphemeral(): { privateKey: KeyObject; enc: Uint8Array } {
  const key = spareEphemeral.pop() ?? freshEphemeral();
  if (!refilling) {
    refilling = true;
    setImmediate(() => {
      refilling = false;
      while (spareEphemeral.length < SPARE_EPHEMERAL) spareEphemeral.push(freshEphemeral());
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
  const { privateKey, enc } = ephemeral ? { privateKey: ephemeral.privateKey, enc: ephemeral.publicKey } : takeEphemeral();
  const shared = extractAndExpand(dh(privateKey, recipientPublicKey, true), concat(enc, recipientPublicKey));
  const { key, baseNonce } = keySchedule(shared, info);
  const cipher = createCipheriv('chacha20-poly1305', key, baseNonce, { authTagLength: 16 });
  cipher.setAAD(aad, { plaintextLength: plaintext.length });
  const ct = concat(cipher.update(plaintext), cipher.final(), cipher.getAuthTag());
  return { enc, ct };
}

/** Single-shot open; throws when the ciphertext does not authenticate. */
export function open(recipient: X25519KeyPair, info: Uint8Array, aad: Uint8Array, enc: Uint8Array, ct: Uint8Array): Uint8Array {
  if (ct.length < 16) throw new Error('HPKE ciphertext too short');
  const shared = extractAndExpand(dh(recipient.privateKey, enc, false), concat(enc, recipient.publicKey));
  const { key, baseNonce } = keySchedule(shared, info);
  const decipher = createDecipheriv('chacha20-poly1305', key, baseNonce, { authTagLength: 16 });
  decipher.setAAD(aad, { plaintextLength: ct.length - 16 });
  decipher.setAuthTag(ct.subarray(ct.length - 16));
  return concat(decipher.update(ct.subarray(0, ct.length - 16)), decipher.final());
}
