// A call's files on the caller's side (SPEC §2.1, §3; issue 20): checked, sealed under a fresh key each and
// uploaded to the caller's hub before the `task.send` that names them leaves. The checks come first, so a
// file no provider may accept (more than 8, over 64 MiB, unreadable) costs no upload. The caller cannot see
// a capability's own `files` rule (the card does not carry it): the provider checks that again and stays
// the authority (SPEC §4.1). Used by the node (files given as base64 through MCP or A2A) and by `anet call`
// (files given as paths, read from disk, never whole in memory).
import { createReadStream } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { basename } from 'node:path';
import { fileTypeFromBuffer } from 'file-type';
import { addressOf, deleteBlobs, uploadBlob, type PlainSource, type Progress } from '../../hub-client/blobs.js';
import { DEFAULT_CHUNK, newBlobKey, sealedSize } from '../../protocol/blob-seal.js';
import { MAX_FILES, MAX_FILE_BYTES, fileRefBody, parseFileRef, type FileRef } from '../../protocol/file-ref.js';
import { mib } from '../../protocol/relay.js';
import { isStrictBase64 } from '../../protocol/base64.js';

/** A file given inline (MCP, A2A, the control socket): its name and standard base64. */
export interface InlineFile {
  name: string;
  data_b64: string;
}

/** A file uploaded already (`anet call --file` uploads it itself, showing progress): its reference, the key in base64. */
export interface UploadedFileArg {
  name: string;
  cid: string;
  size: number;
  key_b64: string;
  chunk: number;
}

/** A file of a call as the node's operations take it. */
export type FileArg = InlineFile | UploadedFileArg;

/** An uploaded file's reference, checked as a provider will check it. */
export function uploadedRef(f: UploadedFileArg): FileRef {
  const ref = parseFileRef(fileRefBody({ ...f, key: Buffer.from(f.key_b64, 'base64') }));
  if ('error' in ref) throw new FileCheckError(`file ${f.name}: ${ref.error}`);
  if (ref.size > MAX_FILE_BYTES) throw new FileCheckError(`file ${f.name}: ${ref.size} bytes; at most ${MAX_FILE_BYTES}`);
  return ref;
}

/** The argument form of an uploaded file (JSON: the key in base64). */
export const uploadedArg = (r: FileRef): UploadedFileArg => ({
  name: r.name,
  cid: r.cid,
  size: r.size,
  key_b64: Buffer.from(r.key).toString('base64'),
  chunk: r.chunk,
});

/** A file ready to upload: its name, where to read it, and the media type this node reads in it. */
export interface FileToSend {
  name: string;
  source: PlainSource;
  mime: string;
}

export class FileCheckError extends Error {
  override name = 'FileCheckError';
}

/** Bytes file-type reads to decide a type (its own `minimumBytes` is 4100). */
const SNIFF_BYTES = 4100;

export function bytesSource(bytes: Buffer): PlainSource {
  return {
    size: bytes.length,
    read: async function* (start) {
      for (let at = start; at < bytes.length; at += DEFAULT_CHUNK) yield bytes.subarray(at, at + DEFAULT_CHUNK);
    },
  };
}

export function pathSource(path: string, size: number): PlainSource {
  return {
    size,
    read: (start) => (size === 0 ? (async function* () {})() : createReadStream(path, { start, highWaterMark: DEFAULT_CHUNK })),
  };
}

const label = (i: number, name: string) => `file ${i + 1} (${name})`;

function checkCount(n: number): void {
  if (n > MAX_FILES) throw new FileCheckError(`${n} files: a call carries at most ${MAX_FILES} (SPEC §2.1); send fewer`);
}

function checkSize(i: number, name: string, size: number): void {
  if (size > MAX_FILE_BYTES)
    throw new FileCheckError(
      `${label(i, name)} is ${size} bytes (${mib(size)}); a file may be at most ${MAX_FILE_BYTES} bytes (${mib(MAX_FILE_BYTES)}, SPEC §2.1): nothing was uploaded`,
    );
}

async function mimeOf(head: Uint8Array): Promise<string> {
  return (await fileTypeFromBuffer(head))?.mime ?? 'application/octet-stream';
}

/** Files named by path (`anet call --file`): each checked before any is uploaded. */
export async function filesFromPaths(paths: string[]): Promise<FileToSend[]> {
  checkCount(paths.length);
  const out: FileToSend[] = [];
  for (const [i, path] of paths.entries()) {
    const name = basename(path);
    const info = await stat(path).catch((err: NodeJS.ErrnoException) => {
      throw new FileCheckError(`${label(i, name)}: cannot read ${path}: ${err.code ?? err.message}`);
    });
    if (!info.isFile()) throw new FileCheckError(`${label(i, name)}: ${path} is not a regular file`);
    checkSize(i, name, info.size);
    out.push({ name, source: pathSource(path, info.size), mime: await mimeOf(await head(path)) });
  }
  return out;
}

async function head(path: string): Promise<Uint8Array> {
  const fd = await open(path, 'r');
  try {
    const buf = Buffer.alloc(SNIFF_BYTES);
    const { bytesRead } = await fd.read(buf, 0, SNIFF_BYTES, 0);
    return buf.subarray(0, bytesRead);
  } finally {
    await fd.close();
  }
}

/** Files given inline: each checked before any is uploaded. */
export async function filesFromInline(files: InlineFile[]): Promise<FileToSend[]> {
  checkCount(files.length);
  const out: FileToSend[] = [];
  for (const [i, f] of files.entries()) {
    // A lenient decoder would read `YR==` as "a": the bytes sent must be exactly the ones given.
    if (!isStrictBase64(f.data_b64)) throw new FileCheckError(`${label(i, f.name)}: not standard padded base64`);
    const bytes = Buffer.from(f.data_b64, 'base64');
    checkSize(i, f.name, bytes.length);
    out.push({ name: f.name, source: bytesSource(bytes), mime: await mimeOf(bytes.subarray(0, SNIFF_BYTES)) });
  }
  return out;
}

/**
 * Seals and uploads each file to the hub at `base`, one after another; the references the `task.send`
 * carries. `progress` hears bytes done of all the files' sealed bytes.
 */
export async function uploadFiles(base: string, files: FileToSend[], progress?: Progress): Promise<FileRef[]> {
  const chunk = DEFAULT_CHUNK;
  const total = files.reduce((s, f) => s + sealedSize(f.source.size, chunk), 0);
  let before = 0;
  const refs: FileRef[] = [];
  const cids: string[] = [];
  try {
    for (const f of files) {
      const key = newBlobKey();
      const cid = await addressOf(f.source, key, chunk);
      const at = before;
      cids.push(cid);
      await uploadBlob(base, f.source, key, chunk, cid, progress && ((done) => progress(at + done, total)));
      before += sealedSize(f.source.size, chunk);
      refs.push({ name: f.name, cid, size: f.source.size, key, chunk });
    }
  } catch (err) {
    // No task will name them: what was uploaded goes (the hub's TTL would keep it a week).
    await forgetBlobs(base, cids);
    throw err;
  }
  return refs;
}

/** Deletes blobs this node uploaded for a task that never went out; best effort (the hub's TTL is the fallback). */
export async function forgetBlobs(base: string, cids: string[]): Promise<void> {
  if (cids.length) await deleteBlobs(base, cids).catch(() => {});
}
