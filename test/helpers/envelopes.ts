import type { Identity } from '../../src/identity/store.js';
import { sealEnvelope } from '../../src/protocol/envelope.js';
import { generateX25519 } from '../../src/protocol/hpke.js';

const key = generateX25519();
const kid = new Uint8Array(16).fill(1);

/**
 * A real sealed envelope from `from` to `to` (sealed to a throwaway key of this module, not `to`'s: what
 * the relay tests need is its bytes and its recipient, which the hub reads in the clear).
 */
export const envelopeTo = (from: Identity, to: Identity, body: string) =>
  sealEnvelope(
    { aid: from.aid, ksn: from.kel.ksn, signer: from.signer },
    { aid: to.aid, kid, publicKey: key.publicKey },
    { type: 'test', ix: 0, ts: Date.now(), exp: Date.now() + 60_000, body },
  ).bytes;
