// A node's connection to its hub relay: one signed push stream for incoming envelopes, and anonymous
// sends on one upstream connection (POSTs for large envelopes and for hubs that do not upgrade). The hub
// keeps what it pushes until the node acknowledges it (issue 19): the stream asks for that with
// `x-anet-ack: 1`, each frame is handed on with its mail id, and the owner acknowledges an id (ack())
// once the message's handling is journaled; acks go in batches, signed, to POST /relay/v2/ack.
import type { Log } from '../util/log.js';
import { corkForTurn } from '../util/stream.js';
import { request, Agent, type ClientRequest } from 'node:http';
import type { Socket } from 'node:net';
import { signRequest } from '../protocol/hub-auth.js';
import type { Identity } from '../identity/store.js';
import { HubRefusedError, HubUnreachableError } from '../hub-client/client.js';
import {
  ACK_HEADER,
  MAX_ACK_IDS,
  MAX_ENVELOPE,
  MAX_MESSAGE,
  UPSTREAM_MAX,
  UPSTREAM_PROTOCOL,
  frame,
  mailId,
  mib,
  type RelayAnswer,
} from '../protocol/relay.js';

const CONNECT_TIMEOUT_MS = 10_000;
const KEEPALIVE_MS = 30_000;
/** After a hub answered the upgrade with something else, sends are POSTed this long before it is asked again. */
const UPSTREAM_RETRY_MS = 60_000;
/** Sends waiting on the upstream fail as unreachable when the hub has answered nothing for this long. */
const ANSWER_TIMEOUT_MS = 30_000;
/** Acks go at most this long after the first of a batch was asked for, or at once when this many wait. */
const ACK_DELAY_MS = 100;
const ACK_BATCH = 256;
/**
 * Ids waiting for an ack that could not be sent (hub unreachable) are kept up to this many; past it they
 * are dropped: the hub pushes those envelopes again, the replay guard refuses them and they are acked then.
 */
const ACK_BACKLOG = 10_000;
const ACK_PATH = '/relay/v2/ack';
/** Pushed envelopes handed to the node in one turn of the event loop at most (see Slicer). */
const PUSH_SLICE = 8;

/** A sealed message larger than the relay carries: the hub would refuse it, so it is never sent. */
export class MessageTooLargeError extends Error {
  override name = 'MessageTooLargeError';
  constructor(
    readonly size: number,
    line = `the message is ${mib(size)} sealed; the relay carries at most ${mib(MAX_MESSAGE)} per message`,
  ) {
    super(line);
  }
}

/** Throws MessageTooLargeError for an envelope over the hub's limit (the same constant the hub uses). */
export function checkEnvelopeSize(bytes: Uint8Array): void {
  if (bytes.length > MAX_ENVELOPE) throw new MessageTooLargeError(bytes.length);
}

/** Splits the stream into its 4-byte-length frames; a frame over the largest envelope ends the stream. */
class FrameReader {
  private chunks: Buffer[] = [];
  private size = 0;

  constructor(
    private readonly onFrame: (bytes: Uint8Array) => void,
    private readonly onBad: () => void,
  ) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.size >= 4) {
      if (this.chunks[0]!.length < 4) this.chunks = [Buffer.concat(this.chunks)];
      const length = this.chunks[0]!.readUInt32BE(0);
      if (length > MAX_ENVELOPE) {
        this.onBad();
        return;
      }
      // Join the chunks only once the whole frame is here: no quadratic copying of a large frame.
      if (this.size < 4 + length) return;
      const all = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks);
      this.onFrame(new Uint8Array(all.subarray(4, 4 + length)));
      const rest = all.subarray(4 + length);
      this.chunks = rest.length ? [rest] : [];
      this.size = rest.length;
    }
  }
}

/** The stream pushed envelopes come from: paused while some of them wait for a later turn. */
interface Pausable {
  pause(): unknown;
  resume(): unknown;
}

/**
 * Hands pushed envelopes on at most PUSH_SLICE per turn of the event loop; the rest wait for the next
 * turns (setImmediate), with the stream paused meanwhile, so no more than one read waits here. Handed on
 * all at once, a burst of 32 calls was opened, admitted, run and answered as one block by a node whose
 * peer, all its calls in that block, sat idle: the two took turns instead of running at once. In slices,
 * the first envelopes' journal batch, service calls and answers are under way while the next ones are
 * opened, and the peer starts on the first answers (bench/calls, 32 at once: 11% more calls/s, CPU per
 * call unchanged).
 */
export class Slicer<T> {
  private readonly waiting: T[] = [];
  private handed = 0;
  private turnEnds = false;
  private paused = false;

  constructor(
    private readonly size: number,
    private readonly handOn: (item: T) => void,
    private readonly source: Pausable,
  ) {}

  push(item: T): void {
    // Behind any that wait (they wait when this turn's slice is full, or after a handOn threw mid-slice).
    if (this.handed < this.size && this.waiting.length === 0) {
      this.handed++;
      try {
        this.handOn(item);
      } finally {
        // Even past a throwing handOn, the turn ends and what waits goes on.
        this.endTurnLater();
      }
      return;
    }
    this.waiting.push(item);
    if (!this.paused) {
      this.paused = true;
      this.source.pause();
    }
    this.endTurnLater();
  }

  private endTurnLater(): void {
    if (this.turnEnds) return;
    this.turnEnds = true;
    setImmediate(this.nextTurn);
  }

  private readonly nextTurn = (): void => {
    this.turnEnds = false;
    this.handed = 0;
    try {
      while (this.handed < this.size && this.waiting.length > 0) {
        this.handed++;
        this.handOn(this.waiting.shift()!);
      }
    } finally {
      // Even past a throwing handOn: the stream must not stay paused, nor the rest wait for ever.
      if (this.waiting.length === 0 && this.paused) {
        this.paused = false;
        this.source.resume();
      }
      if (this.handed > 0) this.endTurnLater();
    }
  };
}

/**
 * The upstream to the hub (see UPSTREAM_PROTOCOL): envelopes out as frames, one answer back for each, in
 * order. It keeps the process alive only while answers are awaited.
 */
class Upstream {
  private readonly waiting: { resolve: (outcome: 'delivered' | 'queued') => void; reject: (err: Error) => void }[] = [];

  constructor(
    readonly socket: Socket,
    head: Buffer,
    private readonly origin: string,
    onEnd: () => void,
    private readonly answerTimeoutMs: number,
  ) {
    const frames = new FrameReader(
      (bytes) => this.answered(bytes),
      () => this.fail('the hub sent a frame over the largest envelope'),
    );
    socket.on('data', (chunk: Buffer) => frames.push(chunk));
    socket.on('error', () => socket.destroy());
    socket.once('end', () => socket.destroy());
    socket.once('close', () => {
      clearTimeout(this.answerTimer);
      onEnd();
      const cause = new Error('the relay upstream closed');
      for (const w of this.waiting.splice(0)) w.reject(new HubUnreachableError(origin, cause));
    });
    socket.setNoDelay(true);
    socket.setKeepAlive(true, KEEPALIVE_MS);
    socket.unref();
    if (head.length) frames.push(head);
  }

  send(bytes: Uint8Array): Promise<'delivered' | 'queued'> {
    return new Promise((resolve, reject) => {
      if (this.waiting.push({ resolve, reject }) === 1) {
        this.socket.ref();
        this.awaitAnswer();
      }
      // Calls under way at once share a write; the hub's end of the upstream does the same.
      corkForTurn(this.socket);
      this.socket.write(frame(bytes));
    });
  }

  private answered(bytes: Uint8Array): void {
    const answer = parseAnswer(bytes);
    if (!answer) {
      this.fail('the hub sent an answer that is not a relay answer');
      return;
    }
    const waiting = this.waiting.shift();
    if (!waiting) {
      this.fail('the hub sent an answer to no envelope');
      return;
    }
    if (this.waiting.length) this.awaitAnswer();
    else {
      this.socket.unref();
      clearTimeout(this.answerTimer);
    }
    if ('outcome' in answer) waiting.resolve(answer.outcome);
    else waiting.reject(new HubRefusedError(answer.error.status, answer.error.code, answer.error.message));
  }

  private answerTimer: NodeJS.Timeout | undefined;

  /**
   * A hub that stops answering (answers come in order, so one lost answer holds up every send after it)
   * fails the sends waiting on it: the next answer is due this long after the last one, or after the send
   * that found none waiting. Its own timer: the socket's idle timer is reset by our own writes too.
   */
  private awaitAnswer(): void {
    clearTimeout(this.answerTimer);
    this.answerTimer = setTimeout(() => this.fail(`no answer from the hub within ${this.answerTimeoutMs / 1000} s`), this.answerTimeoutMs);
    this.answerTimer.unref();
  }

  /** A broken upstream: the envelope whose answer is broken fails with why, the others as unreachable. */
  private fail(why: string): void {
    this.waiting.shift()?.reject(new HubUnreachableError(this.origin, new Error(why)));
    this.socket.destroy();
  }
}

/** A RelayAnswer, or null for anything else. */
function parseAnswer(bytes: Uint8Array): RelayAnswer | null {
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch {
    return null;
  }
  if (typeof v !== 'object' || v === null) return null;
  const a = v as { outcome?: unknown; error?: { status?: unknown; code?: unknown; message?: unknown } };
  if (a.outcome === 'delivered' || a.outcome === 'queued') return { outcome: a.outcome };
  const e = a.error;
  if (typeof e === 'object' && e !== null && typeof e.status === 'number' && typeof e.code === 'string')
    return { error: { status: e.status, code: e.code, message: String(e.message ?? '') } };
  return null;
}

export class RelayClient {
  private readonly base: URL;
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 16 });
  private stream: ClientRequest | null = null;
  /** The stream request while the hub has not answered yet (close() must end it too). */
  private connecting: ClientRequest | null = null;
  private closed = false;
  /** Called once when an open push stream ends (hub restart, network loss): the owner reconnects. */
  onClose: () => void = () => {};

  constructor(
    hub: string,
    private readonly identity: Identity,
    private readonly onEnvelope: (bytes: Uint8Array, id: string) => void,
    private readonly now: () => number = Date.now,
  ) {
    this.base = new URL(hub);
  }

  /**
   * Called before each batch of acks is sent: the owner makes what it did with those messages durable
   * (the messenger syncs its store). An ack sent says the hub may forget the envelope.
   */
  beforeAck: () => Promise<void> = async () => {};
  /** Ids to acknowledge, the timer that sends them, the batch being sent, and whether the hub takes acks. */
  private acks: string[] = [];
  private ackTimer: NodeJS.Timeout | undefined;
  private acking: Promise<void> | null = null;
  private acksTaken = true;
  /** A line for the node's log (an ack the hub refused); quiet by default. */
  log: Log = () => {};

  /** Acknowledges one envelope (by its mail id): the hub deletes it once the batch carrying it arrives. */
  ack(id: string): void {
    if (!this.acksTaken) return;
    this.acks.push(id);
    if (this.acks.length >= ACK_BATCH) void this.flushAcks();
    else if (!this.ackTimer) {
      this.ackTimer = setTimeout(() => void this.flushAcks(), ACK_DELAY_MS);
      this.ackTimer.unref();
    }
  }

  /** Sends the acks asked for so far (one batch at a time); resolves when they were sent or given up. */
  flushAcks(): Promise<void> {
    clearTimeout(this.ackTimer);
    this.ackTimer = undefined;
    if (this.acking) return this.acking.then(() => (this.acks.length ? this.flushAcks() : undefined));
    if (this.acks.length === 0 || !this.acksTaken) return Promise.resolve();
    const ids = this.acks.splice(0, MAX_ACK_IDS);
    this.acking = this.sendAcks(ids)
      .catch((err: Error) => {
        // Not sent (hub unreachable, store closing): kept for the next batch, within the backlog.
        if (this.acks.length + ids.length <= ACK_BACKLOG) this.acks.unshift(...ids);
        this.log(`acknowledging ${ids.length} message(s) to the hub: ${err.message}`, 'warn');
      })
      .finally(() => {
        this.acking = null;
        if (this.acks.length && !this.closed && !this.ackTimer) {
          this.ackTimer = setTimeout(() => void this.flushAcks(), ACK_DELAY_MS);
          this.ackTimer.unref();
        }
      });
    return this.acking;
  }

  private async sendAcks(ids: string[]): Promise<void> {
    await this.beforeAck();
    const body = Buffer.from(JSON.stringify({ ids }));
    const headers = signRequest(this.identity.signer, this.identity.aid, 'POST', ACK_PATH, body, this.now());
    const { status, text } = await this.request('POST', ACK_PATH, body, { ...headers, 'content-type': 'application/json' });
    if (status === 200) return;
    const refused = refusal(status, text);
    // A hub from before acks has no such route (and deletes what it pushes): stop asking, quietly.
    if (status === 404 && refused.code === 'NOT_FOUND') {
      this.acksTaken = false;
      this.acks = [];
      return;
    }
    // Refused (not retried: the envelopes come again, and are acked then).
    this.log(`the hub refused an ack: ${refused.message}`, 'warn');
  }

  /** One request to the hub on the keep-alive agent: its status and body text. */
  private request(
    method: string,
    path: string,
    body: Buffer,
    headers: Record<string, string | number>,
  ): Promise<{ status: number; text: string }> {
    return new Promise((resolve, reject) => {
      const req = request(
        {
          host: this.base.hostname,
          port: this.base.port,
          path,
          method,
          agent: this.agent,
          headers: { ...headers, 'content-length': body.length },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', reject);
        },
      );
      req.setTimeout(CONNECT_TIMEOUT_MS, () => req.destroy(new Error(`no answer within ${CONNECT_TIMEOUT_MS / 1000} s`)));
      req.on('error', (err) => reject(new HubUnreachableError(this.base.origin, err)));
      req.end(body);
    });
  }

  /** Opens the push stream; resolves once the hub has accepted it. */
  connect(): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the relay client is closed'));
    // A hub that came back may be a newer one: ask for the upstream again.
    this.upstreamRetryAt = 0;
    const path = '/relay/v2/stream';
    const headers = signRequest(this.identity.signer, this.identity.aid, 'GET', path, new Uint8Array(), this.now());
    this.stream?.destroy();
    this.stream = null;
    return new Promise((resolve, reject) => {
      let ended = false;
      let opened = false;
      const end = () => {
        if (ended) return;
        ended = true;
        req.destroy();
        if (this.stream === req) {
          this.stream = null;
          if (!this.closed) this.onClose();
        }
      };
      const req = request(
        { host: this.base.hostname, port: this.base.port, path, method: 'GET', headers: { ...headers, [ACK_HEADER]: '1' } },
        (res) => {
          if (res.statusCode !== 200) {
            const chunks: Buffer[] = [];
            res.on('data', (c) => chunks.push(c));
            res.on('end', () => reject(refusal(res.statusCode ?? 0, Buffer.concat(chunks).toString('utf8'))));
            return;
          }
          // A close() while the hub was answering: this stream must not outlive its client.
          if (this.closed) {
            req.destroy();
            return reject(new Error('the relay client is closed'));
          }
          req.setTimeout(0);
          res.socket.setNoDelay(true);
          // Find a silently dead connection (no FIN from a vanished hub) and reconnect.
          res.socket.setKeepAlive(true, KEEPALIVE_MS);
          opened = true;
          this.stream = req;
          res.on('end', end);
          res.on('close', end);
          res.on('error', end);
          // Envelopes still waiting for their turn when the client is closed are dropped: unacknowledged,
          // the hub pushes them again on the next stream.
          const slices = new Slicer<Uint8Array>(
            PUSH_SLICE,
            (bytes) => {
              if (!this.closed) this.onEnvelope(bytes, mailId(bytes));
            },
            res,
          );
          const frames = new FrameReader((bytes) => slices.push(bytes), end);
          res.on('data', (chunk: Buffer) => frames.push(chunk));
          resolve();
        },
      );
      this.connecting = req;
      req.setTimeout(CONNECT_TIMEOUT_MS, () => req.destroy(new Error(`no answer within ${CONNECT_TIMEOUT_MS / 1000} s`)));
      req.on('error', (err) =>
        opened ? end() : reject(this.closed ? new Error('the relay client was closed') : new HubUnreachableError(this.base.origin, err)),
      );
      req.on('close', () => {
        if (this.connecting === req) this.connecting = null;
      });
      req.end();
    });
  }

  private upstream: Upstream | null = null;
  private upstreamOpening: Promise<Upstream | null> | null = null;
  /** The upgrade request under way (close() ends it). */
  private upgrading: ClientRequest | null = null;
  /**
   * Until then sends are POSTed: the hub answered the upgrade with something else (an older hub, a proxy
   * that drops the Upgrade, a passing 502). connect() clears it: the hub may have been replaced.
   */
  private upstreamRetryAt = 0;
  /** Sends waiting on the upstream fail when the hub has answered nothing for this long. */
  answerTimeoutMs = ANSWER_TIMEOUT_MS;

  /** Sends one envelope; the hub pushes it or queues it for an offline recipient. */
  send(bytes: Uint8Array): Promise<'delivered' | 'queued'> {
    if (this.closed) return Promise.reject(new Error('the relay client was closed'));
    if (this.upstream) return bytes.length > UPSTREAM_MAX ? this.post(bytes) : this.upstream.send(bytes);
    if (bytes.length > UPSTREAM_MAX || this.now() < this.upstreamRetryAt) return this.post(bytes);
    return this.openUpstream().then((upstream) => {
      if (upstream) return upstream.send(bytes);
      return this.closed ? Promise.reject(new Error('the relay client was closed')) : this.post(bytes);
    });
  }

  /** The upstream, opened once for the sends that wait for it; null when the hub does not upgrade. */
  private openUpstream(): Promise<Upstream | null> {
    this.upstreamOpening ??= new Promise<Upstream | null>((resolve) => {
      const req = request({
        host: this.base.hostname,
        port: this.base.port,
        path: '/relay/v2/upstream',
        method: 'GET',
        agent: false,
        headers: { connection: 'Upgrade', upgrade: UPSTREAM_PROTOCOL },
      });
      this.upgrading = req;
      req.setTimeout(CONNECT_TIMEOUT_MS, () => req.destroy(new Error(`no answer within ${CONNECT_TIMEOUT_MS / 1000} s`)));
      req.on('upgrade', (_res, socket: Socket, head: Buffer) => {
        req.setTimeout(0);
        if (this.closed) {
          socket.destroy();
          return resolve(null);
        }
        const upstream = new Upstream(
          socket,
          head,
          this.base.origin,
          () => {
            if (this.upstream === upstream) this.upstream = null;
          },
          this.answerTimeoutMs,
        );
        this.upstream = upstream;
        resolve(upstream);
      });
      req.on('response', (res) => {
        this.upstreamRetryAt = this.now() + UPSTREAM_RETRY_MS;
        res.resume();
        resolve(null);
      });
      // Not reachable now: this send goes as a POST (and fails as one); the next one tries again.
      req.on('error', () => resolve(null));
      req.on('close', () => resolve(null));
      req.end();
    }).finally(() => {
      this.upstreamOpening = null;
      this.upgrading = null;
    });
    return this.upstreamOpening;
  }

  private post(bytes: Uint8Array): Promise<'delivered' | 'queued'> {
    return new Promise((resolve, reject) => {
      const req = request(
        {
          host: this.base.hostname,
          port: this.base.port,
          path: '/relay/v2/send',
          method: 'POST',
          agent: this.agent,
          headers: { 'content-type': 'application/cbor', 'content-length': bytes.length },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            if (res.statusCode === 202) resolve(JSON.parse(text).outcome);
            else reject(refusal(res.statusCode ?? 0, text));
          });
        },
      );
      req.setNoDelay(true);
      req.on('error', (err) => reject(new HubUnreachableError(this.base.origin, err)));
      req.end(bytes);
    });
  }

  get connected(): boolean {
    return this.stream !== null;
  }

  /** Closes the stream and the upstream; the acks asked for so far are sent first (resolves when done). */
  async close(): Promise<void> {
    this.closed = true;
    const stream = this.stream;
    this.stream = null;
    stream?.destroy();
    this.connecting?.destroy(new Error('the relay client was closed'));
    this.connecting = null;
    this.upgrading?.destroy();
    this.upstream?.socket.destroy();
    await this.flushAcks().catch(() => {});
    this.agent.destroy();
  }
}

function refusal(status: number, text: string): HubRefusedError {
  try {
    const e = JSON.parse(text).error;
    return new HubRefusedError(status, e.code, e.message);
  } catch {
    return new HubRefusedError(status, `HTTP_${status}`, text.slice(0, 200));
  }
}
