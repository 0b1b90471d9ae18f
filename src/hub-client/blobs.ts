// Blobs on the hub (PROTOCOL §8.11, issue 20): a file's sealed bytes uploaded under their content address
// and downloaded by the recipient. Both directions survive a dropped connection or a hub restart: an upload
// asks the hub how much it kept (`received`, whole pieces) and goes on from there; a download goes on from
// the last byte it got (Range). Neither ever holds more than a chunk or two of a file.
import { type IncomingMessage, request as httpRequest } from 'node:http';
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
import { blobCid } from '../protocol/blob-address.js';
import { hubError } from '../protocol/hub-api.js';
import { type ChunkOptions, TAG_BYTES, sealChunks, sealedDigest, sealedSize } from '../protocol/blob-seal.js';
import { HubRefusedError, HubUnreachableError } from './errors.js';
import { drainedOrClosed, unlessClosed } from '../util/stream.js';

/**
 * A file's plaintext, readable again from any byte (a second pass, a resumed upload). A piece read may be
 * a view of a buffer the source reads into again for the next one: a reader is done with each piece before
 * it asks for the next (sealChunks is).
 */
export interface PlainSource {
  size: number;
  read(start: number): AsyncIterable<Uint8Array>;
}

/** What a transfer says as it goes: bytes done of the total (sealed bytes). */
export type Progress = (done: number, total: number) => void;

export interface TransferOptions {
  /** Waits between attempts after a dropped connection or a hub that is not there (ms); their count is the tries. */
  backoffMs?: number[];
  /** A transfer with no byte for this long is dropped and tried again. */
  stallMs?: number;
  signal?: AbortSignal;
  /** An upload stops once the hub holds the sealed bytes up to here (a piece boundary); the whole blob when absent. */
  until?: number;
  /**
   * Where the hub's copy is known to end (0 for a blob just addressed under a fresh key, the head's end
   * once the head is up): the first try sends from there without asking the hub first. A wrong guess
   * costs a 409, then the hub is asked as after any other.
   */
  from?: number;
}

/** 1 s, 2 s, 4 s … up to 30 s: about four minutes in all, long enough for a hub to restart. */
const BACKOFF_MS = [1000, 2000, 4000, 8000, 15000, 30000, 30000, 30000, 30000, 30000, 30000];
const STALL_MS = 30_000;

export interface BlobStatus {
  size: number;
  received: number;
  complete: boolean;
  served: number;
}

/**
 * The sealed bytes of a file from sealed offset `from`: its chunks from the one holding `from`, the first one
 * cut. With `reuse`, each is a view of one buffer, good until the next is asked for (the upload is done with
 * each before it asks again).
 */
export async function* sealedFrom(
  src: PlainSource,
  key: Uint8Array,
  chunk: number,
  from: number,
  opts: ChunkOptions = {},
): AsyncGenerator<Buffer> {
  const first = Math.floor(from / (chunk + TAG_BYTES));
  let skip = from - first * (chunk + TAG_BYTES);
  for await (const sealed of sealChunks(src.read(first * chunk), key, chunk, src.size, first, opts)) {
    if (skip >= sealed.length) {
      skip -= sealed.length;
      continue;
    }
    yield skip > 0 ? sealed.subarray(skip) : sealed;
    skip = 0;
  }
}

/** The content address of a file sealed under `key`: a first pass over it, nothing kept. */
export async function addressOf(src: PlainSource, key: Uint8Array, chunk: number): Promise<string> {
  return blobCid(await sealedDigest(src.read(0), key, chunk, src.size));
}

/**
 * Whether an error is the hub not being there (connection refused, reset, timed out, busy, restarting), or
 * an upload it dropped as too slow (408: its whole pieces are kept), rather than a refusal.
 */
function isTransient(err: unknown): boolean {
  return err instanceof HubUnreachableError || (err instanceof HubRefusedError && (err.status >= 500 || err.status === 408));
}

/** The hub's refusal, from an answer's status and body text. */
function refused(status: number, text: string): HubRefusedError {
  const { code, message } = hubError(status, text);
  return new HubRefusedError(status, code, message);
}

/**
 * Deletes blobs, anonymously (PROTOCOL §8.11): a signed request would tell the hub which AID read which
 * blob. A few at a time; one the hub no longer keeps is no error.
 */
export async function deleteBlobs(base: string, cids: string[]): Promise<void> {
  for (let i = 0; i < cids.length; i += 8) {
    await Promise.all(
      cids.slice(i, i + 8).map(async (cid) => {
        const res = await asked(base, 'DELETE', `/blobs/${cid}`);
        if (!ok(res)) throw refused(res.statusCode ?? 0, await textOf(res));
        res.resume();
      }),
    );
  }
}

/** The hub's record of a blob, or null when it has none. */
export async function blobStatus(base: string, cid: string, signal?: AbortSignal): Promise<BlobStatus | null> {
  const res = await asked(base, 'GET', `/blobs/${cid}/status`, {}, signal);
  const text = await textOf(res);
  if (res.statusCode === 404) return null;
  if (!ok(res)) throw refused(res.statusCode ?? 0, text);
  return JSON.parse(text) as BlobStatus;
}

/** A request to the hub and its answer, the body unread; HubUnreachableError when the hub is not there. */
async function asked(base: string, method: string, path: string, headers: Record<string, string> = {}, signal?: AbortSignal) {
  try {
    return await request(method, `${base}${path}`, headers, signal);
  } catch (err) {
    throw new HubUnreachableError(base, err);
  }
}

const ok = (res: IncomingMessage) => (res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 300;

/**
 * Uploads a file sealed under `key` as the blob `cid`; resolves once the hub holds all of it (and checked
 * its digest), or its bytes up to `opts.until`. Resumes from what the hub kept after any dropped
 * connection, for about four minutes.
 */
export async function uploadBlob(
  base: string,
  src: PlainSource,
  key: Uint8Array,
  chunk: number,
  cid: string,
  progress?: Progress,
  opts: TransferOptions = {},
): Promise<void> {
  const total = sealedSize(src.size, chunk);
  const end = Math.min(opts.until ?? total, total);
  const backoff = opts.backoffMs ?? BACKOFF_MS;
  let kept = opts.from ?? 0;
  let known = opts.from;
  for (let attempt = 0; ; attempt++) {
    try {
      let from: number;
      if (known !== undefined) {
        from = known;
        known = undefined;
      } else {
        const status = await blobStatus(base, cid, opts.signal);
        if (status && holds(status, end, total)) return progress?.(end, total);
        from = status?.received ?? 0;
        // The hub kept more since the last try: a slow link, not a dead hub; the tries start again.
        if (from > kept) attempt = 0;
        kept = from;
      }
      if (await putFrom(base, src, key, chunk, cid, from, end, total, progress, opts)) return progress?.(end, total);
      // 409: another upload of the same blob moved the hub's offset. Asked again after a wait, a bounded
      // number of times (a hub that answers nothing else must not keep this loop spinning).
      if (attempt >= backoff.length) throw new HubRefusedError(409, 'BLOB_OFFSET', 'the hub kept answering another offset for this upload');
      await sleep(backoff[attempt]!, undefined, opts.signal ? { signal: opts.signal } : {});
    } catch (err) {
      if (!isTransient(err) || attempt >= backoff.length || opts.signal?.aborted) throw err;
      await sleep(backoff[attempt]!, undefined, opts.signal ? { signal: opts.signal } : {});
    }
  }
}

/**
 * Whether the hub holds a blob's sealed bytes up to `end`: a head once they are received, the whole blob
 * only once complete (every byte in is not enough: a hub stopped between the last piece and the digest
 * check completes it on the next PUT, an empty one from `received`).
 */
const holds = (s: { complete: boolean; received: number }, end: number, total: number) => s.complete || (end < total && s.received >= end);

/**
 * One PUT of the sealed bytes [from, end); true once the hub holds them all, false when it kept another
 * offset (409: ask again).
 */
async function putFrom(
  base: string,
  src: PlainSource,
  key: Uint8Array,
  chunk: number,
  cid: string,
  from: number,
  end: number,
  total: number,
  progress: Progress | undefined,
  opts: TransferOptions,
): Promise<boolean> {
  let sent = from;
  /** An error of the file itself (changed while read, unreadable): not the hub's, so never retried. */
  let sourceError: Error | null = null;
  const counted = async function* () {
    try {
      for await (const sealed of sealedFrom(src, key, chunk, from, { reuse: true })) {
        const b = sent + sealed.length > end ? sealed.subarray(0, end - sent) : sealed;
        sent += b.length;
        progress?.(sent, total);
        yield b;
        // A part of the blob (its head) ends here; the whole one reads on, so a file that grew fails.
        if (sent >= end && end < total) return;
      }
    } catch (err) {
      sourceError = err as Error;
      throw err;
    }
  };
  const stall = new Stall(opts.stallMs ?? STALL_MS, opts.signal);
  let res: { status: number; text: string };
  try {
    res = await putChunks(
      `${base}/blobs/${cid}`,
      {
        'content-type': 'application/octet-stream',
        'content-length': String(end - from),
        'x-anet-blob-size': String(total),
        'x-anet-blob-offset': String(from),
      },
      stall.watch(counted()),
      stall,
    );
  } catch (err) {
    if (sourceError) throw sourceError;
    throw new HubUnreachableError(base, err);
  } finally {
    stall.stop();
  }
  if (res.status === 409) return false;
  if (res.status < 200 || res.status >= 300) throw refused(res.status, res.text);
  const answer = JSON.parse(res.text) as { complete: boolean; received: number };
  return holds(answer, end, total);
}

/**
 * A chunk goes to the socket in slices of this size: each that drains shows the link is moving. 256 KiB in
 * the 30 s stall period is ~8.5 KiB/s, under the least rate the hub accepts (1 MiB a minute); smaller
 * slices cost the CLI CPU (one wait for drain each: 64 KiB measured 5.4 -> 7.3 s for 8 × 64 MiB).
 */
const WRITE_SLICE = 256 * 1024;

/**
 * A PUT of `chunks`, each slice written once the last has drained, and the answer's status and text. The
 * next chunk is asked for only once the last one's bytes left this process (its last write called back):
 * a chunk may be a buffer its source fills again (sealedFrom's `reuse`). Not
 * fetch: given an iterable body, fetch (undici, Node 20) read ahead of the socket, and an upload held
 * ~100 MB of sealed chunks (measured: 109 MB of ArrayBuffers for one 64 MiB file, 33 MB this way). A slice
 * drained re-arms `stall`: a slow link (the hub takes down to 1 MiB a minute) is not dropped while it moves.
 */
function putChunks(url: string, headers: Record<string, string>, chunks: AsyncIterable<Buffer>, stall: Stall) {
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = requestFor(url)(url, { method: 'PUT', headers, signal: stall.signal }, (res) => {
      textOf(res).then((text) => {
        resolve({ status: res.statusCode ?? 0, text });
        // Answered before the whole body went (a 409, a refusal): the rest is not wanted.
        if (!sent) req.destroy();
      }, reject);
    });
    let sent = false;
    req.on('error', reject);
    void (async () => {
      for await (const chunk of chunks) {
        let written: Promise<void> = Promise.resolve();
        for (let at = 0; at < chunk.length; at += WRITE_SLICE) {
          if (req.destroyed) return;
          const last = at + WRITE_SLICE >= chunk.length;
          let done: () => void = () => {};
          if (last) written = new Promise<void>((resolve) => (done = resolve));
          if (!req.write(chunk.subarray(at, at + WRITE_SLICE), () => done())) await drainedOrClosed(req);
          stall.touch();
        }
        // A request destroyed meanwhile never calls back: nothing more is written then.
        await unlessClosed(written, req);
      }
      // Gone while the last slice drained (answered early, aborted, failed): nothing to end.
      if (req.destroyed) return;
      sent = true;
      req.end();
    })().catch((err: unknown) => {
      req.destroy(err as Error);
      reject(err);
    });
  });
}

/**
 * The sealed bytes of blob `cid` from byte `from`, going on after a dropped connection from the last byte
 * received. Throws HubRefusedError (NO_BLOB: gone or never complete) or, once the tries are spent,
 * HubUnreachableError.
 */
export async function* downloadBlob(base: string, cid: string, from = 0, opts: TransferOptions = {}): AsyncGenerator<Uint8Array> {
  const backoff = opts.backoffMs ?? BACKOFF_MS;
  let at = from;
  for (let attempt = 0; ; ) {
    const stall = new Stall(opts.stallMs ?? STALL_MS, opts.signal);
    try {
      const res = await asked(base, 'GET', `/blobs/${cid}`, at > 0 ? { range: `bytes=${at}-` } : {}, stall.signal);
      if (!ok(res)) throw refused(res.statusCode ?? 0, await textOf(res));
      try {
        for await (const piece of stall.watch(res as AsyncIterable<Buffer>)) {
          at += piece.length;
          attempt = 0;
          yield piece;
        }
        // Cut off before its length (the hub gave up following an upload, or went): resumed from here.
        if (!res.complete) throw new Error('the download ended before its last byte');
      } catch (err) {
        throw err instanceof HubRefusedError ? err : new HubUnreachableError(base, err);
      } finally {
        res.destroy();
      }
      return;
    } catch (err) {
      if (!isTransient(err) || attempt >= backoff.length || opts.signal?.aborted) throw err;
      await sleep(backoff[attempt++]!, undefined, opts.signal ? { signal: opts.signal } : {});
    } finally {
      stall.stop();
    }
  }
}

/**
 * node:http or node:https, by the scheme as the URL parser reads it (`HTTPS://` is https, as for fetch).
 * node:https is loaded only for an https hub: with TLS it cost every `anet call --file` ~7 ms of its start.
 */
const requireBuiltin = createRequire(import.meta.url);
const requestFor = (url: string): typeof httpRequest =>
  new URL(url).protocol === 'https:' ? (requireBuiltin('node:https') as typeof import('node:https')).request : httpRequest;

/**
 * A request with no body and its answer, the body unread. node:http, not fetch: a 64 MiB download took
 * ~45 ms of CPU this way and ~72 ms through fetch's web streams (warm, measured alone), and `anet call`
 * does not load fetch at all.
 */
function request(method: string, url: string, headers: Record<string, string>, signal?: AbortSignal): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    requestFor(url)(url, { method, headers, ...(signal ? { signal } : {}) }, resolve)
      .on('error', reject)
      .end();
  });
}

/** An answer's body as text, cut at 64 KiB (an error's JSON is a few hundred bytes). */
async function textOf(res: IncomingMessage): Promise<string> {
  let text = '';
  res.setEncoding('utf8');
  for await (const s of res as AsyncIterable<string>) if (text.length < 65_536) text += s;
  return text;
}

/** Aborts a transfer that moved no byte for `ms`, or when the caller's signal aborts. */
class Stall {
  private readonly controller = new AbortController();
  private stopped = false;
  private timer: NodeJS.Timeout;
  readonly signal: AbortSignal;

  constructor(
    private readonly ms: number,
    outer?: AbortSignal,
  ) {
    this.signal = outer ? AbortSignal.any([outer, this.controller.signal]) : this.controller.signal;
    this.timer = this.arm();
  }

  private arm(): NodeJS.Timeout {
    const t = setTimeout(() => this.controller.abort(new Error(`no byte moved for ${this.ms / 1000} s`)), this.ms);
    t.unref();
    return t;
  }

  async *watch<T>(source: AsyncIterable<T>): AsyncGenerator<T> {
    for await (const x of source) {
      this.touch();
      yield x;
    }
  }

  /** Bytes moved: the stall's clock starts again (not once the transfer is over). */
  touch(): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = this.arm();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }
}
