import { sha256 } from '@noble/hashes/sha2.js';
import { signerFromSeed, type Signer } from '../../src/identity/ed25519.js';
import { incept, rotate, validateKel, type KelState, type SignedEvent } from '../../src/identity/kel.js';

/** A deterministic identity with `rotations` rotations done; keys[i] is the key of establishment i. */
export function testIdentity(tag: string, rotations = 0): { kel: KelState; keys: Signer[]; events: SignedEvent[] } {
  const keys = Array.from({ length: rotations + 2 }, (_, i) => signerFromSeed(sha256(new TextEncoder().encode(`${tag}/${i}`))));
  const events = [incept(keys[0]!, keys[1]!.publicKey, 1_700_000_000_000)];
  let kel = validateKel(events);
  for (let i = 1; i <= rotations; i++) {
    events.push(rotate(kel, keys[i - 1]!, keys[i]!, keys[i + 1]!.publicKey, 1_700_000_000_000 + i));
    kel = validateKel(events);
  }
  return { kel, keys, events };
}
