// A call's files on the caller's side (SPEC §2.1, §3; issue 20): checked, sealed under a fresh key each and
// uploaded to the caller's hub, the head of each before the `task.send` that names them leaves, the rest
// while the provider reads. The checks come first, so a file no provider may accept (more than 8, over
// 64 MiB, unreadable) costs no upload. The caller cannot see a capability's own `files` rule (the card
// does not carry it, media types included): the provider checks it on the heads and stays the authority
// (SPEC §4.1), and a refusal stops the upload of the rest. Used by the node (files given as base64 through MCP or A2A) and by `anet call`
// (files given as paths, read from disk, never whole in memory).
import { closeSync, constants, openSync, readSync } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { basename } from 'node:path';
import { addressOf, deleteBlobs, uploadBlob, type PlainSource, type Progress } from '../../hub-client/blobs.js';
import { DEFAULT_CHUNK, TAG_BYTES, newBlobKey, sealedSize } from '../../protocol/blob-seal.js';
import { BLOB_PIECE } from '../../protocol/blob-address.js';
import { MAX_FILES, MAX_FILE_BYTES, fileRefBody, parseFileRef, type FileRef } from '../../protocol/file-ref.js';
import { mib } from '../../protocol/relay.js';
import { isStrictBase64 } from '../../protocol/base64.js';
import { giveBuffer, takeBuffer } from '../../util/buffers.js';

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

/**
 * A file ready to upload: its name and where to read it. Its media type is the provider's to read (SPEC
 * §3): a capability's allowed types are not on its card, so this node has nothing to check one against.
 */
export interface FileToSend {
  name: string;
  source: PlainSource;
}

export class FileCheckError extends Error {
  override name = 'FileCheckError';
}

export function bytesSource(bytes: Buffer): PlainSource {
  return {
    size: bytes.length,
    read: async function* (start) {
      for (let at = start; at < bytes.length; at += DEFAULT_CHUNK) yield bytes.subarray(at, at + DEFAULT_CHUNK);
    },
  };
}

export function pathSource(path: string, size: number): PlainSource {
  return { size, read: (start) => readFrom(path, start, size) };
}

/**
 * A file's bytes from `start` to `size`, read into one buffer again and again (a fresh buffer per read
 * cost the CLI measurable CPU at 64 MiB a file), kept for the file's next pass (src/util/buffers.ts): each
 * piece is a view of it, good until the next is asked for. A file that is not `size` bytes long any more
 * fails: it changed while it was read. Read with readSync: only `anet call` reads files (one at a time,
 * nothing else waiting on its loop but its own upload), and the promise API cost its first pass over
 * 64 MiB ~70 ms more (thread-pool round trips and ~4k more page faults, measured).
 */
async function* readFrom(path: string, start: number, size: number): AsyncGenerator<Buffer> {
  const fd = openSync(path, 'r');
  const buf = takeBuffer(DEFAULT_CHUNK);
  try {
    for (let at = start; at < size; ) {
      const bytesRead = readSync(fd, buf, 0, Math.min(buf.length, size - at), at);
      if (bytesRead === 0) throw new Error(`the file is shorter than ${size} bytes: it changed while it was read`);
      at += bytesRead;
      yield buf.subarray(0, bytesRead);
    }
    if (readSync(fd, buf, 0, 1, size) > 0) throw new Error(`the file is longer than ${size} bytes: it changed while it was read`);
  } finally {
    closeSync(fd);
    giveBuffer(buf);
  }
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
    await access(path, constants.R_OK).catch((err: NodeJS.ErrnoException) => {
      throw new FileCheckError(`${label(i, name)}: cannot read ${path}: ${err.code ?? err.message}`);
    });
    out.push({ name, source: pathSource(path, info.size) });
  }
  return out;
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
    out.push({ name: f.name, source: bytesSource(bytes) });
  }
  return out;
}

/**
 * Seals and uploads each file to the hub at `base`, one after another; the references the `task.send`
 * carries. `progress` hears bytes done of all the files' sealed bytes.
 */
export async function uploadFiles(base: string, files: FileToSend[], progress?: Progress): Promise<FileRef[]> {
  const uploads = await startUploads(base, files, progress);
  await uploads.done;
  return uploads.refs;
}

/** Files on their way to the hub: their references, and the rest of their bytes still going. */
export interface Uploads {
  refs: FileRef[];
  /** Resolves once every file is whole on the hub; rejects with the first upload's error, its blobs deleted. */
  done: Promise<void>;
  /** Stops the uploads (the call ended before they did) and deletes their blobs; resolves once they stopped. */
  stop(): Promise<void>;
}

/**
 * Starts the uploads of a call's files, for a `task.send` that goes out while they run: a provider reads
 * each file as it comes (the hub serves a blob as it is uploaded). Resolves once each file's address is
 * known (a first pass over it: the address names the sealed bytes) and the head of each is on the hub
 * (the sealed bytes of its first chunk: what a provider reads before it admits the call, to learn the
 * type); the rest, file after file, in `done`. Nothing is left on the hub when this rejects.
 */
export async function startUploads(base: string, files: FileToSend[], progress?: Progress): Promise<Uploads> {
  const chunk = DEFAULT_CHUNK;
  const sizes = files.map((f) => sealedSize(f.source.size, chunk));
  const total = sizes.reduce((a, b) => a + b, 0);
  const sent = files.map(() => 0);
  const told = (i: number) => (done: number) => {
    sent[i] = done;
    progress?.(
      sent.reduce((a, b) => a + b, 0),
      total,
    );
  };
  const stopping = new AbortController();
  const opts = { signal: stopping.signal };
  const refs: FileRef[] = [];
  // No task will name them (the upload failed or was stopped): what was uploaded goes (the hub's TTL
  // would keep it a week).
  const forget = () =>
    forgetBlobs(
      base,
      refs.map((r) => r.cid),
    );
  const head = headBytes(chunk);
  /**
   * Each file in turn, its head (the hub has nothing of it yet: its key is new) or the rest (the hub holds
   * its head, or all of a file no longer than its head: then the hub is asked).
   */
  const uploadEach = async (part: 'head' | 'rest') => {
    for (const [i, f] of files.entries()) {
      const r = refs[i]!;
      const more = head < sizes[i]!;
      const where = part === 'head' ? { until: head, from: 0 } : more ? { from: head } : {};
      await uploadBlob(base, f.source, r.key, chunk, r.cid, told(i), { ...opts, ...where });
    }
  };
  try {
    for (const f of files) {
      const key = newBlobKey();
      refs.push({ name: f.name, cid: await addressOf(f.source, key, chunk), size: f.source.size, key, chunk });
    }
    await uploadEach('head');
  } catch (err) {
    await forget();
    throw err;
  }
  const done = uploadEach('rest').catch(async (err: unknown) => {
    await forget();
    throw err;
  });
  // Whoever holds `done` hears its failure; unheard (stopped) it must not end the process.
  done.catch(() => {});
  return {
    refs,
    done,
    async stop() {
      stopping.abort();
      await done.catch(() => {});
      await forget();
    },
  };
}

/** The sealed bytes of a file's first chunk, in whole hub pieces (the hub stores and serves whole pieces). */
const headBytes = (chunk: number) => Math.ceil((chunk + TAG_BYTES) / BLOB_PIECE) * BLOB_PIECE;

/** Deletes blobs this node uploaded for a task that never went out; best effort (the hub's TTL is the fallback). */
export async function forgetBlobs(base: string, cids: string[]): Promise<void> {
  if (cids.length) await deleteBlobs(base, cids).catch(() => {});
}
