// A file of a call as `task.send` carries it (PROTOCOL §6.4, issue 20): not its bytes but where its sealed
// bytes wait on the caller's hub, and the key that opens them — `{name, cid, size, key, chunk}`. The
// message is sealed end to end, so only the provider learns the key; the hub holds a blob it cannot read
// and does not know which task it belongs to.
import { toBody, fromBody } from './body.js';
import { blobDigest } from './blob-address.js';
import { KEY_BYTES, isChunkSize } from './blob-seal.js';
import type { CborValue } from '../identity/cbor.js';

/** The largest file a capability may accept (SPEC §2.1 `files.max_bytes`) and the most files in one call. */
export const MAX_FILE_BYTES = 64 * 1024 * 1024;
export const MAX_FILES = 8;

export interface FileRef {
  name: string;
  /** The content address of the sealed bytes (raw CIDv1, sha2-256). */
  cid: string;
  /** Bytes of plaintext. */
  size: number;
  key: Uint8Array;
  /** Bytes of plaintext per sealed chunk. */
  chunk: number;
}

export function fileRefBody(r: FileRef): Map<string, CborValue> {
  return toBody({ name: r.name, cid: r.cid, size: r.size, key: r.key, chunk: r.chunk });
}

/** Whether a file entry of `task.send` is a reference (new nodes) rather than inline `data_b64` (before issue 20). */
export function isFileRefBody(v: unknown): boolean {
  const f = fromBody(v as CborValue);
  return f !== null && 'cid' in f;
}

/** A file reference read from `task.send`, or what is wrong with it (one line, for `files_not_accepted`). */
export function parseFileRef(v: unknown): FileRef | { error: string } {
  const f = fromBody(v as CborValue);
  if (!f) return { error: 'not a file entry' };
  const { name, cid, size, key, chunk } = f;
  if (typeof cid !== 'string' || blobDigest(cid) === null) return { error: 'no valid content address (cid)' };
  if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0) return { error: 'no valid size' };
  if (!(key instanceof Uint8Array) || key.length !== KEY_BYTES) return { error: 'no valid key' };
  if (!isChunkSize(chunk)) return { error: 'no valid chunk size (a power of two, 64 KiB to 1 MiB)' };
  return { name: typeof name === 'string' ? name : '', cid, size, key, chunk };
}
