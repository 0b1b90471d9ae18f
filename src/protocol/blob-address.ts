// Blobs (issue 20, PROTOCOL §8.11): a file rides beside its task, not in it. The caller's node encrypts
// the file in chunks and uploads the ciphertext to its hub under a content address; the sealed task carries
// the address and the key; the provider's node downloads it. The address is a CIDv1 of codec raw over the
// sha2-256 of the whole ciphertext, in base32 lower-case (`bafkrei…`), so the hub can check what it was
// given and nobody can choose which bytes an address names. The node and the hub share these numbers.
import { CID } from 'multiformats/cid';
import { create as createDigest } from 'multiformats/hashes/digest';

const RAW = 0x55;
const SHA2_256 = 0x12;

/** The hub stores, resumes and serves a blob in pieces of this many ciphertext bytes (1 MiB). */
export const BLOB_PIECE = 1 << 20;

/** The largest blob: a 64 MiB file sealed in chunks of at least 64 KiB, each with its 16-byte tag. */
export const MAX_BLOB_BYTES = 64 * 1024 * 1024 + 16 * 1024;

/** What one client (address) may have kept or being uploaded at once on one hub process (1 GiB). */
export const BLOB_UPLOADER_BYTES = 1024 ** 3;

/** Blob bytes a hub keeps in all by default (16 GiB; counted in its storage, shared by replicas). */
export const BLOB_TOTAL_BYTES = 16 * 1024 ** 3;

/** An incomplete blob that got no new piece for this long (1 h) is deleted. */
export const BLOB_IDLE_MS = 3_600_000;

/** Request headers of `PUT /blobs/<cid>`: the blob's whole size, and where this body starts in it. */
export const BLOB_SIZE_HEADER = 'x-anet-blob-size';
export const BLOB_OFFSET_HEADER = 'x-anet-blob-offset';

/** The blob CIDs one acknowledgement (`POST /relay/v2/ack`, `blobs`) may name. */
export const MAX_ACK_BLOBS = 1000;

/** The address of a blob whose ciphertext has this sha2-256 digest (32 bytes). */
export function blobCid(digest: Uint8Array): string {
  if (digest.length !== 32) throw new Error(`a blob's digest is 32 bytes of sha2-256, not ${digest.length}`);
  return CID.createV1(RAW, createDigest(SHA2_256, digest)).toString();
}

/** The sha2-256 digest a blob address names; null unless `cid` is a canonical raw sha2-256 CIDv1 (`bafkrei…`). */
export function blobDigest(cid: string): Uint8Array | null {
  if (!/^bafkrei[a-z2-7]{52}$/.test(cid)) return null;
  try {
    const parsed = CID.parse(cid);
    const ok = parsed.version === 1 && parsed.code === RAW && parsed.multihash.code === SHA2_256 && parsed.toString() === cid;
    return ok && parsed.multihash.digest.length === 32 ? new Uint8Array(parsed.multihash.digest) : null;
  } catch {
    return null;
  }
}
