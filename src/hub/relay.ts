// The hub relay (SPEC §11, WIRE §4): end-to-end encrypted envelopes in, pushed to the recipient's open
// stream, or queued in memory (bounded, with a TTL) while it is offline. Sends are anonymous — the sender
// is known only inside the ciphertext — and nothing about who talked to whom is ever written to disk.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { envelopeRecipient, EnvelopeRefused } from '../protocol/envelope.js';
import { CborError } from '../identity/cbor.js';
import { MIB, MAX_ENVELOPE, UPSTREAM_MAX, frame, type RelayAnswer } from '../protocol/relay.js';

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

/**
 * Bytes held for clients, in all and per client, taken as they arrive: the bytes of request bodies being
 * received (a body that declares 16 MiB and sends nothing holds nothing), and no client more than its
 * share however many connections it opens.
 */
export class Budget {
  used = 0;
  private readonly clients = new Map<string, number>();

  constructor(readonly total: number, readonly perClient: number) {}

  take(client: string, bytes: number): boolean {
    const mine = this.clients.get(client) ?? 0;
    if (this.used + bytes > this.total || mine + bytes > this.perClient) return false;
    this.used += bytes;
    if (bytes > 0) this.clients.set(client, mine + bytes);
    return true;
  }

  give(client: string, bytes: number): void {
    if (bytes <= 0) return;
    this.used -= bytes;
    const left = (this.clients.get(client) ?? 0) - bytes;
    if (left > 0) this.clients.set(client, left);
    else this.clients.delete(client);
  }

  /** What `client` holds now. */
  of(client: string): number {
    return this.clients.get(client) ?? 0;
  }
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
  /** Open upstream connections (see upstream()). */
  private readonly upstreams = new Set<Socket>();
  /** Send bodies and upstream frames being received: see Budget. */
  readonly uploads: Budget;

  /**
   * `limits`: DEFAULT_LIMITS where not given. `recipient`: whether an offline AID may have envelopes
   * queued for it (the hub: registered, with encryption keys published); anyone may otherwise name any
   * string as a recipient and fill the queue for everyone.
   */
  constructor(private readonly now: () => number, limits: Partial<RelayLimits> = {}, private readonly recipient: (aid: string) => boolean = () => true) {
    this.limits = { ...DEFAULT_LIMITS, ...limits };
    this.uploads = new Budget(this.limits.uploadBytes, this.limits.uploadBytesPerClient);
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
    const room = () => this.queued + bytes.length <= this.limits.totalBytes && (this.queuedBy.get(client) ?? 0) + bytes.length <= this.limits.queuedBytesPerClient;
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
    if (outcome === 'unknown') return refused(404, 'UNKNOWN_RECIPIENT', 'the recipient is not a node of this hub (registered, with encryption keys published): the hub holds envelopes only for its own nodes');
    return { outcome };
  }

  /** Whether another upstream may be opened now. */
  upstreamRoom(): boolean {
    return this.upstreams.size < this.limits.upstreams;
  }

  /** Serves one upstream connection of `client`, after the upgrade (`head`: bytes that came with the request). */
  upstream(socket: Socket, head: Buffer, client = socket.remoteAddress ?? ''): void {
    const connection = new UpstreamConnection(this, socket, this.limits.frameTimeoutMs, client);
    this.upstreams.add(socket);
    socket.once('close', () => {
      this.upstreams.delete(socket);
      connection.closed();
    });
    socket.on('error', () => socket.destroy());
    // The server's sockets allow half-open connections, and an upgraded one has no HTTP handling left:
    // a node that closes its side would leave this one (and any budget its frame held) open for ever.
    socket.once('end', () => socket.destroy());
    socket.on('data', (chunk: Buffer) => connection.received(chunk));
    if (head.length) connection.received(head);
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
    // Upgraded connections are the relay's own: the HTTP server no longer tracks them.
    for (const socket of this.upstreams) socket.destroy();
    for (const s of this.streams.values()) s.end();
    this.streams.clear();
    this.queues.clear();
    this.queued = 0;
    this.queuedBy.clear();
  }
}

const refused = (status: number, code: string, message: string): RelayAnswer => ({ error: { status, code, message } });

/**
 * One upstream's frames in, answers out. A frame's bytes are taken from the relay's upload budget as they
 * arrive (as a POST's are), under the client's share, each piece copied into a buffer of its own (a view
 * into the socket's chunk would keep the whole chunk alive in the queue): a header that promises 256 KiB
 * and is followed by nothing holds nothing. A frame the budget has no room for is read on and dropped, and
 * answered BUSY. From its header, a frame has `frameTimeoutMs` to arrive whole, however it trickles in; one
 * over UPSTREAM_MAX ends the connection. Reading pauses while answers wait to be written, so a client that
 * does not read them costs the hub one socket buffer, and one that reads none for `frameTimeoutMs` is
 * disconnected.
 */
class UpstreamConnection {
  private readonly head = Buffer.alloc(4);
  private headFilled = 0;
  /** The length of the frame being received (-1 between frames), its pieces so far and their bytes (held in the budget). */
  private expect = -1;
  private pieces: Buffer[] = [];
  private filled = 0;
  /** Bytes of a frame answered BUSY still to be read and dropped. */
  private skipping = 0;
  /** The rest of a chunk not read yet because answers wait to be written (the socket is paused). */
  private pending: Buffer | null = null;
  private ended = false;
  private deadline: NodeJS.Timeout | null = null;

  constructor(private readonly relay: Relay, private readonly socket: Socket, private readonly frameTimeoutMs: number, private readonly client: string) {}

  received(chunk: Buffer): void {
    if (this.ended) return;
    try {
      this.read(chunk);
    } catch {
      // Not a state any input should reach; the connection goes, the hub stays up.
      this.socket.destroy();
    }
  }

  closed(): void {
    this.relay.uploads.give(this.client, this.filled);
    this.filled = 0;
    this.pieces = [];
    this.expect = -1;
    this.stopDeadline();
  }

  private read(chunk: Buffer): void {
    let at = 0;
    while (!(this.pending || this.ended || this.socket.destroyed)) {
      if (this.skipping) {
        if (at === chunk.length) break;
        const n = Math.min(this.skipping, chunk.length - at);
        at += n;
        if ((this.skipping -= n) === 0) this.stopDeadline();
      } else if (this.expect >= 0) {
        if (this.filled === this.expect) this.complete();
        else {
          if (at === chunk.length) break;
          const n = Math.min(this.expect - this.filled, chunk.length - at);
          if (this.relay.uploads.take(this.client, n)) {
            const piece = Buffer.allocUnsafeSlow(n); // not from the shared pool: a queued envelope keeps only its own bytes
            chunk.copy(piece, 0, at, at + n);
            this.pieces.push(piece);
            this.filled += n;
            at += n;
          } else this.busy();
        }
      } else {
        if (at === chunk.length) break;
        const n = Math.min(4 - this.headFilled, chunk.length - at);
        chunk.copy(this.head, this.headFilled, at, at + n);
        at += n;
        if ((this.headFilled += n) === 4) this.begin(this.head.readUInt32BE(0));
      }
      if (this.pending === null && this.blocked()) this.pending = chunk.subarray(at);
    }
    // A frame begun and not yet whole runs against its deadline; between frames a connection may idle.
    if ((this.expect >= 0 || this.skipping) && !this.deadline) {
      this.deadline = setTimeout(() => this.socket.destroy(), this.frameTimeoutMs);
      this.deadline.unref();
    }
  }

  private begin(length: number): void {
    this.headFilled = 0;
    if (length > UPSTREAM_MAX) {
      // The refusal goes out, and the connection with it: what still comes is read and dropped (closing
      // on unread input would reset the connection and lose the answers on their way), until the
      // client's side ends, or for a second.
      this.ended = true;
      this.answer(refused(413, 'TOO_LARGE', `an upstream frame is at most ${UPSTREAM_MAX} bytes; POST larger envelopes to /relay/v2/send`));
      this.socket.end();
      setTimeout(() => this.socket.destroy(), 1000).unref();
      return;
    }
    this.expect = length;
    this.pieces = [];
    this.filled = 0;
  }

  /** No room for the next piece: what the frame holds goes back, the rest of it is read and dropped. */
  private busy(): void {
    this.skipping = this.expect - this.filled;
    this.relay.uploads.give(this.client, this.filled);
    this.expect = -1;
    this.pieces = [];
    this.filled = 0;
    this.answer(refused(503, 'BUSY', 'the hub is receiving too many messages at once; retry shortly'));
  }

  private complete(): void {
    const pieces = this.pieces;
    const length = this.filled;
    this.expect = -1;
    this.pieces = [];
    this.filled = 0;
    this.relay.uploads.give(this.client, length);
    this.stopDeadline();
    let body: Buffer;
    if (pieces.length === 1) body = pieces[0]!;
    else {
      body = Buffer.allocUnsafeSlow(length);
      let at = 0;
      for (const p of pieces) at += p.copy(body, at);
    }
    let answer: RelayAnswer;
    try {
      answer = this.relay.answer(new Uint8Array(body.buffer, body.byteOffset, body.length), this.client);
    } catch (err) {
      answer = refused(500, 'INTERNAL', (err as Error).message);
    }
    this.answer(answer);
  }

  private answer(answer: RelayAnswer): void {
    this.socket.write(frame(Buffer.from(JSON.stringify(answer))));
  }

  /** Answers wait to be written: the socket pauses until they drain, then the rest of the chunk is read. */
  private blocked(): boolean {
    if (!this.socket.writableNeedDrain || this.ended) return false;
    this.socket.pause();
    // Paused, the hub would not even see the client close: one that reads no answers for this long goes.
    const stalled = setTimeout(() => this.socket.destroy(), this.frameTimeoutMs);
    stalled.unref();
    this.socket.once('drain', () => {
      clearTimeout(stalled);
      const rest = this.pending!;
      this.pending = null;
      this.socket.resume();
      this.received(rest);
    });
    return true;
  }

  private stopDeadline(): void {
    if (this.deadline) clearTimeout(this.deadline);
    this.deadline = null;
  }
}
