// Authenticated writes to the hub (SPEC §11): each write is signed by the node's current key, over the
// method, path, time, a nonce and the body digest. The hub allows a bounded clock window and refuses a
// nonce it has seen, so a captured request cannot be replayed.
import { sha256 } from '@noble/hashes/sha2.js';
import { randomHex } from '../util/random.js';
import type { Signer } from '../identity/ed25519.js';

export const AUTH_WINDOW_MS = 120_000;

export interface AuthHeaders {
  'x-anet-aid': string;
  'x-anet-time': string;
  'x-anet-nonce': string;
  'x-anet-signature': string;
}

export function authMessage(method: string, path: string, time: string, nonce: string, body: Uint8Array): Buffer {
  const digest = Buffer.from(sha256(body)).toString('hex');
  return Buffer.from(`anet-hub-auth/v1\n${method.toUpperCase()}\n${path}\n${time}\n${nonce}\n${digest}`);
}

export function signRequest(signer: Signer, aid: string, method: string, path: string, body: Uint8Array, now: number): AuthHeaders {
  const time = String(now);
  const nonce = randomHex(16);
  return {
    'x-anet-aid': aid,
    'x-anet-time': time,
    'x-anet-nonce': nonce,
    'x-anet-signature': Buffer.from(signer.sign(authMessage(method, path, time, nonce, body))).toString('base64url'),
  };
}
