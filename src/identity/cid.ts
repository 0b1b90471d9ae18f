// CIDv1, dag-cbor codec, sha2-256 — the AID and event-id form of WIRE.md §2 (multiformats does the multibase).
import { CID } from 'multiformats/cid';
import { create as createDigest } from 'multiformats/hashes/digest';
import { sha256 } from '@noble/hashes/sha2.js';

const DAG_CBOR = 0x71;
const SHA2_256 = 0x12;

export function cidOf(bytes: Uint8Array): string {
  return CID.createV1(DAG_CBOR, createDigest(SHA2_256, sha256(bytes))).toString();
}

/** True when `text` is a CIDv1 dag-cbor sha2-256 in base32 lower-case (`bafyrei…`). */
export function isAid(text: string): boolean {
  if (!/^bafyrei[a-z2-7]{52}$/.test(text)) return false;
  try {
    const cid = CID.parse(text);
    return cid.version === 1 && cid.code === DAG_CBOR && cid.multihash.code === SHA2_256 && cid.toString() === text;
  } catch {
    return false;
  }
}
