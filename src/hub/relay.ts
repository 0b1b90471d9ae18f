// The hub relay's mailbox (SPEC §11, WIRE §4): end-to-end encrypted envelopes in, pushed to the
// recipient's open stream, or queued in memory (bounded, with a TTL) while it is offline. Sends are
// anonymous — the sender is known only inside the ciphertext — and nothing about who talked to whom is
// ever written to disk. Envelopes come by POST (src/hub/relay-routes.ts) or over an upstream connection
// (src/hub/upstream.ts, which reads the frames and hands each envelope here).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { envelopeRecipient, EnvelopeRefused } from '../protocol/envelope.js';
import { CborError } from '../identity/cbor.js';
import { MIB, MAX_ENVELOPE, frame, type RelayAnswer } from '../protocol/relay.js';
import { Budget } from './budget.js';
import { Upstreams } from './upstream.js';

export interface RelayLimits {
  /** Envelopes queued for one offline recipient. */
  perRecipient: number;
  /** Their bytes in all: without it 1000 large envelopes could hold 16 GiB for one recipient. */
  perRecipientBytes: number;
  /**
   * Queued bytes for all recipients together: sends are anonymous and name any recipient, so per
   * recipient bounds alone let one sender fill the hub's memory by inventing recipients.
   */
  totalBytes: number;
  /** Send bodies (POSTs and upstream frames) being received at once, in bytes, counted as they arrive. */
  uploadBytes: number;
  /** Of those, what one client (an address, an IPv6 /64) may hold: a few clients cannot starve the rest. */
  uploadBytesPerClient: number;
  /** Of the queued bytes, what one client's sends may hold (sends are anonymous; the address is all there is). */
  queuedBytesPerClient: number;
  ttlMs: number;
  /** Upstream connections at once (each is anonymous and may idle for as long as its node runs). */
  upstreams: number;
  /** How long an upstream frame may take to arrive once its header has: a stalled one would hold its budget. */
  frameTimeoutMs: number;
}

/**
 * Per offline recipient: room for two of the largest envelopes, or for the whole count of typical small
 * ones (a few KiB each); an empty queue always takes one largest envelope.
 */
export const DEFAULT_LIMITS: RelayLimits = {
  perRecipient: 1000,
  perRecipientBytes: 2 * MAX_ENVELOPE,
  totalBytes: 512 * MIB,
  uploadBytes: 256 * MIB,
  uploadBytesPerClient: 64 * MIB,
  queuedBytesPerClient: 256 * MIB,
  ttlMs: 10 * 60_000,
  upstreams: 4096,
  frameTimeoutMs: 30_000,
};

interface Queued {
  bytes: Uint8Array;
  expires: number;
  /** Who sent it (an address key, in memory only, while it waits): the per-client share of the queue. */
  client: string;
}

const queuedBytes = (queue: Queued[]) => queue.reduce((sum, q) => sum + q.bytes.length, 0);

export class Relay {
  private readonly streams = new Map<string, ServerResponse>();
  private readonly queues = new Map<string, Queued[]>();
  /** Bytes in all queues (expired entries count until they are swept). */
  private queued = 0;
  /** The same, per client that sent them. */
  private readonly queuedBy = new Map<string, number>();
  readonly stats = { delivered: 0, queued: 0, dropped: 0, expired: 0 };

  private readonly limits: RelayLimits;
  /** Send bodies and upstream frames being received: see Budget. */
  readonly uploads: Budget;
  /** Open upstream connections (see upstream()). */
  private readonly upstreams: Upstreams;

  /**
   * `limits`: DEFAULT_LIMITS where not given. `recipient`: whether an offline AID may have envelopes
   * queued for it (the hub: registered, with encryption keys published); anyone may otherwise name any
   * string as a recipient and fill the queue for everyone.
   */
  constructor(
    private readonly now: () => number,
    limits: Partial<RelayLimits> = {},
    private readonly recipient: (aid: string) => boolean = () => true,
  ) {
    this.limits = { ...DEFAULT_LIMITS, ...limits };
    this.uploads = new Budget(this.limits.uploadBytes, this.limits.uploadBytesPerClient);
    this.upstreams = new Upstreams(this, this.limits.upstreams, this.limits.frameTimeoutMs);
  }

  /**
   * Accepts one envelope from `client`: 'delivered' (pushed), 'queued' (recipient offline), 'full', or
   * 'unknown' (offline and not one the hub queues for).
   */
  accept(bytes: Uint8Array, client = ''): 'delivered' | 'queued' | 'full' | 'unknown' {
    const to = envelopeRecipient(bytes);
    const stream = this.streams.get(to);
    if (stream && !stream.writableEnded) {
      // A recipient that stops reading its stream gets no more than a queue's worth buffered for it.
      if (stream.writableLength + bytes.length > this.limits.perRecipientBytes) return this.drop();
      stream.write(frame(bytes));
      this.stats.delivered++;
      return 'delivered';
    }
    if (!this.recipient(to)) return 'unknown';
    const queue = this.live(to);
    if (queue.length >= this.limits.perRecipient || queuedBytes(queue) + bytes.length > this.limits.perRecipientBytes) return this.drop();
    const room = () =>
      this.queued + bytes.length <= this.limits.totalBytes &&
      (this.queuedBy.get(client) ?? 0) + bytes.length <= this.limits.queuedBytesPerClient;
    if (!room()) this.sweep();
    if (!room()) return this.drop();
    queue.push({ bytes, expires: this.now() + this.limits.ttlMs, client });
    this.queues.set(to, queue);
    this.queued += bytes.length;
    this.queuedBy.set(client, (this.queuedBy.get(client) ?? 0) + bytes.length);
    this.stats.queued++;
    return 'queued';
  }

  /** An envelope leaves its queue (pushed or expired): its bytes leave the counts. */
  private forget(q: Queued): void {
    this.queued -= q.bytes.length;
    const left = (this.queuedBy.get(q.client) ?? 0) - q.bytes.length;
    if (left > 0) this.queuedBy.set(q.client, left);
    else this.queuedBy.delete(q.client);
  }

  /** accept(), as the sender is answered: the outcome, or why the envelope was refused. */
  answer(bytes: Uint8Array, client = ''): RelayAnswer {
    let outcome: ReturnType<Relay['accept']>;
    try {
      outcome = this.accept(bytes, client);
    } catch (err) {
      if (err instanceof EnvelopeRefused || err instanceof CborError) return refused(400, 'BAD_ENVELOPE', err.message);
      throw err;
    }
    if (outcome === 'full') return refused(429, 'QUEUE_FULL', 'the recipient is offline and its queue is full');
    if (outcome === 'unknown')
      return refused(
        404,
        'UNKNOWN_RECIPIENT',
        'the recipient is not a node of this hub (registered, with encryption keys published): the hub holds envelopes only for its own nodes',
      );
    return { outcome };
  }

  /** Whether another upstream may be opened now. */
  upstreamRoom(): boolean {
    return this.upstreams.room();
  }

  /** Serves one upstream connection of `client`, after the upgrade (`head`: bytes that came with the request). */
  upstream(socket: Socket, head: Buffer, client = socket.remoteAddress ?? ''): void {
    this.upstreams.serve(socket, head, client);
  }

  private drop(): 'full' {
    this.stats.dropped++;
    return 'full';
  }

  /** The unexpired envelopes queued for `aid` (expired ones leave the queue and the byte count). */
  private live(aid: string): Queued[] {
    const now = this.now();
    const queue = this.queues.get(aid) ?? [];
    const kept = queue.filter((q) => q.expires > now);
    if (kept.length < queue.length) {
      this.stats.expired += queue.length - kept.length;
      for (const q of queue) if (q.expires <= now) this.forget(q);
      if (kept.length) this.queues.set(aid, kept);
      else this.queues.delete(aid);
    }
    return kept;
  }

  /** Drops every expired envelope (queues of recipients nobody sends to again are otherwise kept). */
  private sweep(): void {
    for (const aid of [...this.queues.keys()]) this.live(aid);
  }

  /** Takes `bytes` of the upload budget for `client` (see Budget): false when there is no room. */
  startUpload(bytes: number, client = ''): boolean {
    return this.uploads.take(client, bytes);
  }

  endUpload(bytes: number, client = ''): void {
    this.uploads.give(client, bytes);
  }

  /** Bytes queued for offline recipients, in all. */
  queuedBytes(): number {
    return this.queued;
  }

  /** Opens the push stream of an (authenticated) AID and flushes what waited for it. */
  attach(aid: string, req: IncomingMessage, res: ServerResponse): void {
    this.streams.get(aid)?.end();
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'cache-control': 'no-store' });
    res.flushHeaders();
    res.socket?.setNoDelay(true);
    this.streams.set(aid, res);
    for (const q of this.live(aid)) {
      res.write(frame(q.bytes));
      this.forget(q);
      this.stats.delivered++;
    }
    this.queues.delete(aid);
    const detach = () => {
      if (this.streams.get(aid) === res) this.streams.delete(aid);
    };
    req.once('close', detach);
    res.once('close', detach);
  }

  close(): void {
    this.upstreams.close();
    for (const s of this.streams.values()) s.end();
    this.streams.clear();
    this.queues.clear();
    this.queued = 0;
    this.queuedBy.clear();
  }
}

const refused = (status: number, code: string, message: string): RelayAnswer => ({ error: { status, code, message } });
