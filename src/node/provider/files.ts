// A call's files on the provider's side (SPEC §3, issue 20). A file arrives as a reference to a sealed
// blob on the hub. Before the call is admitted, only its first chunk is fetched and opened, to read its
// media type (the node's own reading, SPEC §3); once the call runs, the blob is downloaded, opened chunk
// by chunk and written into the service's request as base64 as it comes: no file is ever whole in this
// process, and no byte of it is ever written to disk (so `discard` has nothing to erase). The blobs go
// from the hub once the call has ended, whatever the end.
import { createHash } from 'node:crypto';
import { fileTypeFromBuffer } from 'file-type';
import { downloadBlob, type TransferOptions } from '../../hub-client/blobs.js';
import type { HubClient } from '../../hub-client/client.js';
import { openChunks } from '../../protocol/blob-seal.js';
import type { FileRef } from '../../protocol/file-ref.js';
import type { StreamBody } from '../../service/call.js';
export type { StreamBody };

/** A file as the service gets it: inline base64 (from a node before issue 20), or a blob read as the call runs. */
export type FileOut = { name: string; mime: string; data_b64: string } | BlobFileOut;
/** A blob file; `sha256` (hex, of the plaintext) once it was read whole. */
export type BlobFileOut = { name: string; mime: string; ref: FileRef; sha256?: string };

/**
 * The plaintext of a blob file, chunk by chunk, each checked before it is given out. Each chunk is a view of
 * one buffer the next overwrites: a reader is done with it (hashed, encoded, copied) before it asks again.
 */
export function fileBytes(hub: string, ref: FileRef, opts: TransferOptions = {}): AsyncGenerator<Buffer> {
  return openChunks(downloadBlob(hub, ref.cid, 0, opts), ref.key, ref.chunk, ref.size, 0, { reuse: true });
}

/**
 * The type check runs while the call is being admitted, on the relay's delivery: a few quick tries only
 * (a call whose file cannot be read now is refused; the caller may send it again).
 */
const SNIFF_TRIES: TransferOptions = { backoffMs: [500, 1000, 2000], stallMs: 10_000 };

/**
 * How long reading the first chunks of a call's files may take in all (a hub that trickles bytes must not
 * hold a delivery): the checks give one deadline to all of a call's files.
 */
export const SNIFF_DEADLINE_MS = 15_000;

/** Bytes file-type reads to decide a type (its own `minimumBytes` is 4100). */
const SNIFF_BYTES = 4100;

/** The media type of a blob file, read from its first chunk only (the rest stays on the hub). */
export async function sniffBlob(hub: string, ref: FileRef, deadline = AbortSignal.timeout(SNIFF_DEADLINE_MS)): Promise<string> {
  const controller = new AbortController();
  const signal = AbortSignal.any([deadline, controller.signal]);
  try {
    // The first chunk's plaintext once its tag checked (a copy of its head: the buffer is reused), and
    // the next ones' while fewer bytes than the type needs are in.
    const head: Buffer[] = [];
    let held = 0;
    for await (const part of fileBytes(hub, ref, { ...SNIFF_TRIES, signal })) {
      head.push(Buffer.from(part.subarray(0, SNIFF_BYTES - held)));
      held += head.at(-1)!.length;
      if (held >= SNIFF_BYTES) break;
    }
    return (await fileTypeFromBuffer(Buffer.concat(head, held)))?.mime ?? 'application/octet-stream';
  } finally {
    // The hub streams the whole blob to a GET: only the first chunk was wanted.
    controller.abort();
  }
}

/** Bytes of the base64 text of `n` bytes. */
const base64Length = (n: number) => 4 * Math.ceil(n / 3);

/** The JSON text that opens a file's entry in the service's body, up to its base64. */
const fileHead = (f: FileOut, first: boolean) =>
  `${first ? '' : ','}{"name":${JSON.stringify(f.name)},"mime":${JSON.stringify(f.mime)},"data_b64":"`;
const FILE_TAIL = '"}';

/**
 * The service's body `{"args": …, "files": [...]}` (SPEC §3), streamed, with its exact length. Text that
 * may not be ASCII (the arguments, a file's name) goes as UTF-8 bytes; strings are base64 and punctuation.
 */
export function streamBody(hub: string, argsText: string, files: FileOut[], signal?: AbortSignal): StreamBody {
  const open = `{"args":${argsText},"files":[`;
  const close = ']}';
  let length = Buffer.byteLength(open) + Buffer.byteLength(close);
  files.forEach((f, i) => {
    const size = 'ref' in f ? base64Length(f.ref.size) : Buffer.byteLength(f.data_b64);
    length += Buffer.byteLength(fileHead(f, i === 0)) + size + FILE_TAIL.length;
  });
  return {
    length,
    chunks: async function* () {
      yield Buffer.from(open);
      for (const [i, f] of files.entries()) {
        yield Buffer.from(fileHead(f, i === 0));
        if ('ref' in f) yield* named(i, f, base64Of(f, fileBytes(hub, f.ref, signal ? { signal } : {})));
        else yield f.data_b64;
        yield FILE_TAIL;
      }
      yield close;
    },
  };
}

/** A file's stream, its failure naming the file (the caller reads it in the `file_unavailable` detail). */
async function* named<T>(i: number, f: FileOut, source: AsyncIterable<T>): AsyncGenerator<T> {
  try {
    yield* source;
  } catch (err) {
    throw new Error(`file ${i + 1} (${f.name}): ${(err as Error).message}`);
  }
}

/**
 * Plaintext bytes encoded to one base64 string: 64 KiB of text, a multiple of 3 bytes. A string over
 * ~128 KiB is a large object to V8, on pages of its own, touched fresh each time (a 1 MiB chunk as one
 * string cost the provider ~16k page faults per 64 MiB file, measured); smaller ones live in the young
 * generation, whose pages are reused at once.
 */
const BASE64_SLICE = 48 * 1024;

/**
 * Base64 of a file as its chunks come, as strings (no Buffer copy of each), its digest kept on `f`. A chunk
 * is 1 MiB, not a multiple of 3: the 1 or 2 bytes left over start the next one, joined without copying the
 * chunk itself.
 */
async function* base64Of(f: BlobFileOut, plain: AsyncIterable<Buffer>): AsyncGenerator<string> {
  const hash = createHash('sha256');
  let carry = Buffer.alloc(0);
  for await (const chunk of plain) {
    hash.update(chunk);
    let at = 0;
    if (carry.length > 0) {
      at = Math.min(3 - carry.length, chunk.length);
      carry = Buffer.concat([carry, chunk.subarray(0, at)]);
      if (carry.length < 3) continue;
      yield carry.toString('base64');
    }
    const whole = at + Math.floor((chunk.length - at) / 3) * 3;
    for (let from = at; from < whole; from += BASE64_SLICE) yield chunk.toString('base64', from, Math.min(from + BASE64_SLICE, whole));
    carry = Buffer.from(chunk.subarray(whole));
  }
  if (carry.length > 0) yield carry.toString('base64');
  f.sha256 = hash.digest('hex');
}

/** Deletes a call's blobs from the hub (its files were read, or never will be); the hub's TTL is the fallback. */
export function dropBlobs(client: Pick<HubClient, 'deleteBlobs'>, cids: string[] | undefined, log: (line: string) => void): void {
  if (!cids?.length) return;
  client
    .deleteBlobs(cids)
    .catch((err: Error) => log(`could not delete ${cids.length} file blob(s) from the hub (they expire): ${err.message}`));
}
