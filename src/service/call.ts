// The service module (SPEC §3): one capability call as an HTTP/1.1 POST to the local service, over its
// Unix socket (or TCP when the module allows it), and the service's answer mapped to the caller's reply
// by the table of §3.1. The socket is checked (§3.2) before anything is sent; what a caller is told never
// holds a local path — `operatorDetail` (logs only) may.
import { Agent, STATUS_CODES, request, type ClientRequest, type IncomingMessage } from 'node:http';
import { oneLine } from '../util/text.js';
import { drainedOrClosed } from '../util/stream.js';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { ServiceUrl } from './url.js';
import { checkSocket } from './socket.js';
import { perTurn } from '../util/per-turn.js';
import { readTokenFile } from '../config/environment.js';
import type { Preview } from '../protocol/preview.js';
import { isEventStream, readEventStream } from './sse.js';

export const MAX_RESULT_BYTES = 1024 * 1024;
/**
 * What the event-stream parser may hold of one event beyond the result's limit: the `event:`/`data:`
 * field names of a multi-line event, so a result just under 1 MiB is still read whole (and then checked
 * in bytes); anything larger ends the call `service_error`.
 */
const EVENT_MARGIN_CHARS = 64 * 1024;
const MESSAGE_CHARS = 200;

export interface ServiceTarget {
  url: ServiceUrl;
  tokenFile?: string;
  timeoutMs: number;
}

/**
 * A body written as it is read (a call's files come from the hub as the request goes out): its exact
 * length first, for Content-Length. A failing source ends the call `failed`, reason `file_unavailable`.
 */
export interface StreamBody {
  length: number;
  /** Bytes, and strings of ASCII only (base64), written one byte a character (see writeStream). */
  chunks(): AsyncIterable<Buffer | string>;
}

export interface ServiceRequest {
  caller: string;
  callId: string;
  capability: string;
  /** The exact body: the argument object, or `{args, files}` (SPEC §3), streamed when it holds files. */
  body: Uint8Array | StreamBody;
  /**
   * The service's previews, when it answers `text/event-stream` (issue 21): each valid `progress` event
   * of at most MAX_PREVIEW_BYTES, in order, as it arrives. Without it, progress is read and dropped.
   */
  onProgress?: (p: Preview) => void;
}

export type ServiceOutcome =
  | { state: 'completed'; result: Record<string, unknown> /** The answer as the service wrote it (exact numbers). */; text: string }
  | { state: 'rejected'; reason: 'service_rejected'; message: string }
  | {
      state: 'failed';
      reason: 'service_unavailable' | 'service_busy' | 'service_error' | 'outcome_unknown' | 'file_unavailable';
      /** For `file_unavailable`: which file, and why (a blob gone from the hub, damaged, or the hub unreachable). */
      detail?: string;
      retryAfterMs?: number;
      /** For the operator's log only: may name local paths. */
      operatorDetail?: string;
    };

/**
 * Connections to services are kept for the next call when the service allows it (HTTP/1.1 keep-alive):
 * a new connection per call cost 125–175 µs more CPU (node and service together) and about 100 µs more
 * latency than a kept one, measured here with both in one process. A connection idle for a second is
 * closed, well before common servers close theirs (Node 5 s, gunicorn 2 s), so a call rarely meets a
 * connection the service is closing; if one does, its outcome is `outcome_unknown` as for any dropped
 * connection. Free connections do not keep the process alive.
 */
const IDLE_MS = 1000;
type PoolOptions = Parameters<Agent['getName']>[0] & { caller?: string };
/**
 * Connections are pooled per caller: a service that writes a stray second answer on a connection can
 * then only confuse two calls of the same caller, never hand one caller's data to another.
 */
class PerCallerAgent extends Agent {
  override getName(options?: PoolOptions): string {
    return `${super.getName(options)}|${options?.caller ?? ''}`;
  }
}
class PerCallerHttpsAgent extends HttpsAgent {
  override getName(options?: PoolOptions): string {
    return `${super.getName(options as never)}|${options?.caller ?? ''}`;
  }
}
const keptAlive = new PerCallerAgent({ keepAlive: true, timeout: IDLE_MS, scheduling: 'lifo' });
const keptAliveTls = new PerCallerHttpsAgent({ keepAlive: true, timeout: IDLE_MS, scheduling: 'lifo' });

const unavailable = (operatorDetail: string): ServiceOutcome => ({ state: 'failed', reason: 'service_unavailable', operatorDetail });
const serviceError = (operatorDetail: string): ServiceOutcome => ({ state: 'failed', reason: 'service_error', operatorDetail });
const unknown = (detail: 'timeout' | 'connection_lost', operatorDetail: string): ServiceOutcome => ({
  state: 'failed',
  reason: 'outcome_unknown',
  detail,
  operatorDetail,
});

/** The §3.2 check of a target's socket (null for TCP targets and safe sockets). */
export function checkTarget(target: ServiceTarget): Promise<{ reason: string } | null> {
  if (target.url.kind !== 'unix') return Promise.resolve(null);
  return sharedSocketCheck(target.url.socketPath);
}

/**
 * The §3.2 check, made once per socket and turn of the event loop: the ~10 system calls of one check cost
 * ~30 µs here, and the calls of a burst are admitted together. A call admitted in a later turn checks
 * again, so a socket or directory changed since is seen before anything is sent to it.
 */
const sharedSocketCheck = perTurn((path: string) =>
  checkSocket(path).catch((err: Error) => ({ reason: `cannot check the socket: ${err.message}` })),
);

/**
 * Makes one call; never throws. `socketCheck` is the §3.2 check when the caller started it already (it
 * runs while the call is admitted); otherwise it is made here, before anything is sent.
 */
export async function callService(
  target: ServiceTarget,
  call: ServiceRequest,
  now: () => number = Date.now,
  signal?: AbortSignal,
  socketCheck?: Promise<{ reason: string } | null>,
): Promise<ServiceOutcome> {
  const fault = await (socketCheck ?? checkTarget(target));
  if (fault) return unavailable(fault.reason);
  const headers: Record<string, string | number> = {
    'content-type': 'application/json',
    'content-length': call.body.length,
    'x-anet-caller': call.caller,
    'x-anet-call': call.callId,
    'x-anet-capability': call.capability,
  };
  if (target.tokenFile) {
    // readTokenFile checks the mode; a file we may not read (mode 000, 200) still throws on read.
    const token = await readTokenFile(target.tokenFile).catch((err: Error) => ({ error: err.message }));
    if ('error' in token) return unavailable(`token file: ${token.error}`);
    headers.authorization = `Bearer ${token.token}`;
  }
  return post(target, headers, call.body, now, signal, call.onProgress);
}

function post(
  target: ServiceTarget,
  headers: Record<string, string | number>,
  body: Uint8Array | StreamBody,
  now: () => number,
  signal?: AbortSignal,
  onProgress?: (p: Preview) => void,
): Promise<ServiceOutcome> {
  return new Promise((resolve) => {
    let settled = false;
    const settle = (outcome: ServiceOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      // The node-wide stop signal must not keep this call (and its answer) alive after it ended.
      signal?.removeEventListener('abort', onStop);
      // A complete exchange leaves its connection to the agent, for the next call; anything else (a
      // timeout, a stop, an answer not read to its end — an event stream is left at its result — or an
      // early answer while the body is still being sent) closes it, or the unsent body would hold the
      // connection for ever. Closing is also how a service learns that a stop or a cancel ended its call.
      if (!(res?.complete && req.writableFinished)) req.destroy();
      resolve(outcome);
    };
    const onStop = () => settle(unknown('connection_lost', whyAborted(signal)));
    /** Whether any byte of the request may have reached the service: from then on, a failure is "unknown". */
    let connected = false;
    const url = target.url;
    const tls = url.kind === 'tcp' && url.url.protocol === 'https:';
    const agent = tls ? keptAliveTls : keptAlive;
    const caller = String(headers['x-anet-caller']);
    const options =
      url.kind === 'unix'
        ? { socketPath: url.socketPath, path: url.requestPath, method: 'POST', headers, agent, caller }
        : {
            host: url.url.hostname,
            port: url.url.port,
            path: `${url.url.pathname}${url.url.search}`,
            method: 'POST',
            headers,
            agent,
            caller,
          };
    const send = tls ? httpsRequest : request;
    /** Once the answer's head is here, `answer` reads the rest and decides; socket errors are its to see. */
    let res: IncomingMessage | undefined;
    const req = send(options, (response) => {
      res = response;
      void answer(response, now, onProgress).then(settle);
    });
    // A kept connection is connected already: a failure on it may come after the service read the call.
    req.on('socket', (socket) => {
      if (!socket.connecting) connected = true;
      else
        socket.once('connect', () => {
          connected = true;
        });
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (res) return;
      settle(connected ? unknown('connection_lost', err.message) : unavailable(`${err.code ?? ''} ${err.message}`.trim()));
    });
    // The node is stopping: drop the connection; the call is ended `interrupted` at the next start.
    const timer = setTimeout(
      () =>
        settle(
          connected
            ? unknown('timeout', `no answer within ${target.timeoutMs} ms`)
            : unavailable(`could not connect within ${target.timeoutMs} ms`),
        ),
      target.timeoutMs,
    );
    if (signal?.aborted) return settle(unknown('connection_lost', whyAborted(signal)));
    signal?.addEventListener('abort', onStop, { once: true });
    if (body instanceof Uint8Array) return void req.end(body);
    void writeStream(req, body, () => settled).then(
      () => {},
      (err: Error) =>
        settle({ state: 'failed', reason: 'file_unavailable', detail: oneLine(err.message, 200), operatorDetail: err.message }),
    );
  });
}

/**
 * The operator's words for an aborted call: the reason it was aborted with (a cancel says so), else the
 * node's stop — an abort() with no reason gives a plain AbortError.
 */
function whyAborted(signal: AbortSignal | undefined): string {
  const reason: unknown = signal?.reason;
  return reason instanceof Error && reason.name !== 'AbortError' ? reason.message : 'the node stopped';
}

/**
 * Writes a streamed body with backpressure (never more than a chunk or two of a file in this process), and
 * stops once the call is settled (an early answer, a timeout, a stop). Base64 comes as strings: written as
 * they are, with no copy into a Buffer first, as latin1: for ASCII the same bytes as UTF-8, but node sizes
 * a UTF-8 write for three bytes a character, and at 64 KiB a string that fresh 192 KiB allocation per
 * write cost the provider about twice the CPU of the write itself (measured over a Unix socket).
 */
async function writeStream(req: ClientRequest, body: StreamBody, settled: () => boolean): Promise<void> {
  for await (const piece of body.chunks()) {
    if (settled() || req.destroyed) return;
    const more = typeof piece === 'string' ? req.write(piece, 'latin1') : req.write(piece);
    if (!more) await drainedOrClosed(req);
  }
  if (!settled()) req.end();
}

async function answer(res: IncomingMessage, now: () => number, onProgress?: (p: Preview) => void): Promise<ServiceOutcome> {
  const status = res.statusCode ?? 0;
  const ok = status >= 200 && status < 300;
  if (ok && isEventStream(res.headers['content-type'])) return streamed(res, now, onProgress);
  // Only a 2xx (the result) and a 4xx (the service's own words) need the body; for the rest the status
  // says it all, and a body that stalls must not turn a clear answer into a timeout.
  const wantsBody = ok || (status >= 400 && status < 500 && status !== 429);
  if (!wantsBody) res.resume();
  const read: Read = wantsBody ? await readLimited(res) : { kind: 'ok', bytes: Buffer.alloc(0) };
  if (!ok) return byStatus(status, `HTTP ${status}`, rejection(status, res.statusMessage, read), res.headers['retry-after'], now);
  if (read.kind === 'broken') return unknown('connection_lost', 'the answer broke off');
  if (read.kind === 'too_large') return serviceError(`the answer is over ${MAX_RESULT_BYTES} bytes`);
  return resultOf(read.bytes.toString('utf8'), 'the answer');
}

/** A failed call by the §3.1 table, from an HTTP status or a streamed `error` event's `status`. */
function byStatus(
  status: number,
  /** What gave the status, for the operator: `HTTP 503`, or the error event's. */
  source: string,
  message: string,
  retryAfterHeader: string | string[] | undefined,
  now: () => number,
): ServiceOutcome {
  if (status === 429 || status === 503) {
    const retryAfterMs = retryAfter(retryAfterHeader, now());
    return {
      state: 'failed',
      reason: 'service_busy',
      ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
      operatorDetail: source,
    };
  }
  if (status === 502 || status === 504) return unknown('connection_lost', `${source} from the service`);
  if (status >= 400 && status < 500) return { state: 'rejected', reason: 'service_rejected', message };
  return serviceError(source);
}

/** A result as the service wrote it: a JSON object of at most 1 MiB, its text kept for exact numbers. */
function resultOf(text: string, what: string): ServiceOutcome {
  if (Buffer.byteLength(text, 'utf8') > MAX_RESULT_BYTES) return serviceError(`${what} is over ${MAX_RESULT_BYTES} bytes`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return serviceError(`${what} is not JSON`);
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) return serviceError(`${what} is not a JSON object`);
  return { state: 'completed', result: value as Record<string, unknown>, text };
}

/** A `text/event-stream` answer (issue 21): previews as they come, then its one result or error event. */
async function streamed(res: IncomingMessage, now: () => number, onProgress?: (p: Preview) => void): Promise<ServiceOutcome> {
  const end = await readEventStream(res, MAX_RESULT_BYTES + EVENT_MARGIN_CHARS, onProgress);
  switch (end.kind) {
    case 'result':
      return resultOf(end.data, 'the result event');
    case 'error':
      return streamedError(end.data, now);
    case 'too_large':
      return serviceError(`an event of the stream is over ${MAX_RESULT_BYTES} bytes`);
    case 'ended':
      return unknown('connection_lost', 'the event stream ended without a result');
    case 'broken':
      return unknown('connection_lost', 'the event stream broke off');
  }
}

/** An `error` event: `{"status": N, "error": "..."}`, read as that HTTP status would be (no Retry-After). */
function streamedError(data: string, now: () => number): ServiceOutcome {
  const value = parseOrNull(data) as { status?: unknown; error?: unknown } | null;
  const status = value?.status;
  if (typeof status !== 'number' || !Number.isInteger(status) || status < 100 || status > 599)
    return serviceError('the error event has no HTTP status');
  const error =
    typeof value?.error === 'string' && value.error.length > 0
      ? value.error.slice(0, MESSAGE_CHARS)
      : `${status} ${STATUS_CODES[status] ?? ''}`.trim();
  return byStatus(status, `an error event with status ${status}`, error, undefined, now);
}

function parseOrNull(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

type Read = { kind: 'ok'; bytes: Buffer } | { kind: 'too_large' } | { kind: 'broken' };

/** Reads at most 1 MiB of the answer; stops reading (and says so) beyond it. */
function readLimited(res: IncomingMessage): Promise<Read> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_RESULT_BYTES) {
        // Decided first: destroying emits 'aborted' and 'close' at once.
        resolve({ kind: 'too_large' });
        return res.destroy();
      }
      chunks.push(chunk);
    });
    res.on('end', () => resolve({ kind: 'ok', bytes: Buffer.concat(chunks) }));
    res.on('aborted', () => resolve({ kind: 'broken' }));
    res.on('error', () => resolve({ kind: 'broken' }));
    res.on('close', () => resolve(res.complete ? { kind: 'ok', bytes: Buffer.concat(chunks) } : { kind: 'broken' }));
  });
}

/** The service's own words: the `error` string of a JSON body (first 200 chars), else the status line. */
function rejection(status: number, statusMessage: string | undefined, read: Read): string {
  if (read.kind === 'ok') {
    try {
      const error = (JSON.parse(read.bytes.toString('utf8')) as { error?: unknown })?.error;
      if (typeof error === 'string' && error.length > 0) return error.slice(0, MESSAGE_CHARS);
    } catch {
      // not JSON: the status line says it
    }
  }
  return `${status} ${statusMessage ?? ''}`.trim();
}

/**
 * The longest wait a service's `Retry-After` is passed on as: beyond it the caller is told 24 h. An
 * unbounded value (`99999999999999999999`) would reach the caller as `1e+23`, no integer at all.
 */
export const MAX_RETRY_AFTER_MS = 24 * 3_600_000;

/** `Retry-After` as delay-seconds or an HTTP date, in whole ms up to 24 h; undefined when absent or unreadable. */
export function retryAfter(header: string | string[] | undefined, now: number): number | undefined {
  const value = (Array.isArray(header) ? header[0] : header)?.trim();
  if (!value) return undefined;
  // Compared as digits, not as a number: 20 digits and more are past 24 h whatever they say.
  if (/^\d+$/.test(value)) return value.length > 6 ? MAX_RETRY_AFTER_MS : Math.min(Number(value) * 1000, MAX_RETRY_AFTER_MS);
  // An HTTP date (RFC 9110 §5.6.7: each of its three forms starts with the day's name); Date.parse alone
  // would read `1.5` as a day in 2001.
  const at = /^[A-Za-z]{3}/.test(value) ? Date.parse(value) : NaN;
  return Number.isNaN(at) ? undefined : Math.min(MAX_RETRY_AFTER_MS, Math.max(0, Math.ceil(at - now)));
}
