// The hub relay (SPEC §11, WIRE §4, issue 19): end-to-end encrypted envelopes in, kept in the
// recipient's durable mailbox (src/hub/storage: LevelDB or PostgreSQL), pushed to its stream when it has
// one open, and deleted once the recipient acknowledges them (POST /relay/v2/ack) or their mailbox TTL
// ends. Every envelope the hub accepts is kept first and pushed second: an accepted envelope survives a
// hub restart, and a node that crashes between receiving one and journaling it gets it again (its replay
// guard drops a copy it had processed). A stream opened without `x-anet-ack: 1` (an older node) has each
// envelope deleted once pushed, as before acks existed, so such nodes never fill their mailbox.
//
// Sends are anonymous — the sender is known only inside the ciphertext — and nothing about who sent
// what is written anywhere: the mailbox holds the recipient, the envelope's bytes and its expiry. Envelopes
// come by POST (src/hub/relay-routes.ts) or over an upstream connection (src/hub/upstream.ts, which reads
// the frames and hands each envelope here). With hub replicas a RelayBus (NATS) carries a live envelope
// to the replica holding its recipient's stream.
import { corkForTurn } from '../util/stream.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { envelopeRecipient, EnvelopeRefused } from '../protocol/envelope.js';
import { CborError } from '../identity/cbor.js';
import { MIB, MAX_ENVELOPE, UPSTREAM_MAX, frame, mailId, type RelayAnswer } from '../protocol/relay.js';
import { Budget } from './budget.js';
import { Upstreams } from './upstream.js';
import { KeyedSerial } from '../runtime/serial.js';
import type { AgentStore, MailboxLimits, MailboxStore } from './storage/types.js';

export interface RelayLimits {
  /** Envelopes kept for one recipient. */
  perRecipient: number;
  /** Their bytes in all: without it 1000 large envelopes could hold 16 GiB for one recipient. */
  perRecipientBytes: number;
  /**
   * Kept bytes for all recipients together: sends are anonymous and name any recipient, so per
   * recipient bounds alone let one sender fill the hub's store by naming every recipient there is.
   */
  totalBytes: number;
  /** Send bodies (POSTs and upstream frames) being received at once, in bytes, counted as they arrive. */
  uploadBytes: number;
  /** Of those, what one client (an address, an IPv6 /64) may hold: a few clients cannot starve the rest. */
  uploadBytesPerClient: number;
  /**
   * Of the kept bytes, what one client's sends may hold (sends are anonymous; the address is all there
   * is). Counted in this process's memory only, for the envelopes it accepted while they are kept: the
   * hub never writes who sent what, so after a restart (or on another replica) the share starts again.
   */
  queuedBytesPerClient: number;
  /** The mailbox TTL (`--mailbox-ttl`): how long an envelope is kept for a recipient that does not acknowledge it. */
  ttlMs: number;
  /** Upstream connections at once (each is anonymous and may idle for as long as its node runs). */
  upstreams: number;
  /** How long an upstream frame may take to arrive once its header has: a stalled one would hold its budget. */
  frameTimeoutMs: number;
}

const DAY = 24 * 3_600_000;

/**
 * Per recipient: room for two of the largest envelopes, or for the whole count of typical small ones (a
 * few KiB each); an empty mailbox always takes one largest envelope. Kept 7 days: a node offline over a
 * long weekend still gets its text tasks.
 */
export const DEFAULT_LIMITS: RelayLimits = {
  perRecipient: 1000,
  perRecipientBytes: 2 * MAX_ENVELOPE,
  totalBytes: 512 * MIB,
  uploadBytes: 256 * MIB,
  uploadBytesPerClient: 64 * MIB,
  queuedBytesPerClient: 256 * MIB,
  ttlMs: 7 * DAY,
  // Measured idle (bench/hub): ~3 KiB an upstream, ~24 KiB a push stream (RSS), so 16384 nodes holding
  // both cost ~430 MiB, and what their frames hold waiting for the store is within the upload budget.
  // Each node also holds two sockets: the hub's file limit must be above twice this (HUB.md).
  upstreams: 16384,
  frameTimeoutMs: 30_000,
};

/**
 * Hub replicas' messaging (NATS, src/hub/nats-bus.ts; the hub works without one). `deliver` asks the
 * replica holding `to`'s stream to push `bytes` (true when one did); `hold` is called when a stream
 * attaches here, so `push` reaches it from other replicas and `flush` (list the mailbox, push what that
 * stream has not had) runs on a mail notice, once the bus has the subscription, and after the bus comes
 * back (its result releases it, called when the stream closes); `mail` tells the replica holding `to`'s
 * stream that mail was kept for it. Envelopes over UPSTREAM_MAX never ride the bus: they are kept, then `mail`.
 */
export interface RelayBus {
  deliver(to: string, bytes: Uint8Array): Promise<boolean>;
  hold(to: string, push: (bytes: Uint8Array) => boolean, flush: () => void): () => void;
  mail(to: string): void;
  close(): Promise<void>;
}

/** What the relay keeps envelopes in, and whom for. */
export interface RelayStorage {
  mailbox: MailboxStore;
  agents: Pick<AgentStore, 'isRecipient'>;
}

/** One open push stream on this process. */
interface Stream {
  res: ServerResponse;
  /** The node acknowledges (`x-anet-ack: 1`): envelopes stay kept until acked; else deleted once pushed. */
  acks: boolean;
  /** Ids pushed on this stream (→ the push's number on it): a flush pushes only the others. */
  pushed: Map<string, number>;
  pushes: number;
  /** A flush under way, and whether another was asked for meanwhile. */
  flushing: Promise<void> | null;
  again: boolean;
  /** A write was held back (the node was not reading): the next drain flushes. */
  behind: boolean;
  release: () => void;
}

/** An accept's place among those to one recipient (see Relay.turn). */
interface Turn {
  before: Promise<void>;
  done: () => void;
}

/** Per envelope this process accepted while it is kept: the per-client share (see queuedBytesPerClient). */
interface Share {
  client: string;
  n: number;
  expires: number;
}

/** The smallest envelope: a sealed message padded to 256 bytes plus its 16-byte AEAD tag, before the outer map. */
export const MIN_ENVELOPE = 256 + 16;

/** How often expired mail is deleted. */
const SWEEP_EVERY_MS = 60_000;

/**
 * How long an envelope kept for an offline recipient counts against its sender's share at most. The share
 * is this process's memory: with replicas the recipient may acknowledge through another one, which this
 * process never hears of, so a share that waited for the ack could fill for days with mail long delivered.
 */
const SHARE_MS = 3_600_000;

export class Relay {
  private readonly streams = new Map<string, Stream>();
  /**
   * Per recipient, the last accept still pushing: pushes go out in the order envelopes were accepted
   * (a backend may finish concurrent writes in another order), so one upstream's envelopes arrive in order.
   */
  private readonly pushing = new Map<string, Promise<void>>();
  /** `<to>!<id>` → the client that sent it (memory only). */
  private readonly shares = new Map<string, Share>();
  /** `<to>!<id>` of envelopes pushed while their mailbox write is still under way (see keepAndPush). */
  private readonly unwritten = new Set<string>();
  /** Kept bytes per client, of the shares above. */
  private readonly queuedBy = new Map<string, number>();
  /** Mailbox listings under way, one per recipient (see flushOnce). */
  private readonly listing = new KeyedSerial();
  /** `accepted`: envelopes offered (by senders and replicas); `delivered`: pushes on a recipient stream. */
  readonly stats = { accepted: 0, delivered: 0, queued: 0, dropped: 0, expired: 0, acked: 0 };

  /** Recipient streams open on this process (the hub's metrics). */
  get openStreams(): number {
    return this.streams.size;
  }

  private readonly limits: RelayLimits;
  private readonly mailLimits: MailboxLimits;
  /** Send bodies and upstream frames being received: see Budget. */
  readonly uploads: Budget;
  /** Open upstream connections (see upstream()). */
  private readonly upstreams: Upstreams;
  private readonly sweeper: NodeJS.Timeout;
  /** When a full mailbox last made the relay sweep expired mail at once (at most once a second). */
  private lastFullSweep = 0;
  private closed = false;
  /** Other stores swept on the relay's timer (the hub's blobs: src/hub/blobs.ts). */
  private readonly alsoSwept: (() => Promise<unknown>)[] = [];

  /** `limits`: DEFAULT_LIMITS where not given. `bus`: the replicas' messaging, when there are replicas. */
  constructor(
    private readonly now: () => number,
    limits: Partial<RelayLimits> | undefined,
    private readonly storage: RelayStorage,
    private readonly bus?: RelayBus,
  ) {
    this.limits = { ...DEFAULT_LIMITS, ...limits };
    const { perRecipient, perRecipientBytes, totalBytes } = this.limits;
    this.mailLimits = { perRecipient, perRecipientBytes, totalBytes };
    this.uploads = new Budget(this.limits.uploadBytes, this.limits.uploadBytesPerClient);
    this.upstreams = new Upstreams(this, this.limits.upstreams, this.limits.frameTimeoutMs);
    this.sweeper = setInterval(() => void this.sweep(), SWEEP_EVERY_MS);
    this.sweeper.unref();
  }

  /**
   * Accepts one envelope from `client`: 'delivered' (kept and pushed now), 'queued' (kept for later),
   * 'full' (a bound would be passed), or 'unknown' (not a recipient the hub keeps mail for).
   */
  async accept(bytes: Uint8Array, client = ''): Promise<'delivered' | 'queued' | 'full' | 'unknown'> {
    this.stats.accepted++;
    const to = envelopeRecipient(bytes);
    // Its place in `to`'s order is taken before the first await.
    const turn = this.turn(to);
    try {
      return await this.keepAndPush(to, bytes, client, turn);
    } finally {
      turn.done();
    }
  }

  private async keepAndPush(to: string, bytes: Uint8Array, client: string, turn: Turn) {
    // A stream open here is signed by a registered AID: it gets mail even before it published its keys.
    if (!this.streams.has(to) && !(await this.storage.agents.isRecipient(to))) return 'unknown';
    const id = mailId(bytes);
    const n = bytes.length;
    // The client's share is taken before the next await, so its racing sends cannot pass it together.
    const key = `${to}!${id}`;
    const mine = this.queuedBy.get(client) ?? 0;
    if (mine + n > this.limits.queuedBytesPerClient) return this.drop();
    this.queuedBy.set(client, mine + n);
    // A recipient whose stream is on this process gets the envelope once the mailbox has decided to keep
    // it (counted, its write issued), not once that write lands: a thread-pool round trip less on each
    // message's way (from accept to push, 266–329 µs at the median before, 208–267 µs after, in
    // bench/calls with calls one at a time; twice per call). The sender is still answered after the
    // write. A hub that dies between the two has pushed what it never kept: the recipient has it, and its
    // ack deletes nothing. Pushes to one recipient go in the order their envelopes were accepted (the
    // turn), each handing the turn on once it is written.
    let pushing: Promise<boolean> | undefined;
    const pushInTurn = (): Promise<boolean> => {
      pushing ??= turn.before.then(() => this.push(to, id, bytes)).finally(turn.done);
      return pushing;
    };
    const pushEarly = () => {
      if (!this.streams.has(to)) return;
      this.unwritten.add(key);
      // Its outcome is read below; if the write fails, nothing reads it.
      pushInTurn().catch(() => {});
    };
    let kept: 'kept' | 'full';
    try {
      kept = await this.keep(to, id, bytes, pushEarly);
    } catch (err) {
      this.unshare(client, n);
      throw err;
    } finally {
      this.unwritten.delete(key);
    }
    if (kept === 'full' || this.shares.has(key)) {
      // Full, or the same envelope kept already (its first copy holds the share).
      this.unshare(client, n);
      if (kept === 'full') return this.drop();
    } else this.shares.set(key, { client, n, expires: this.now() + Math.min(this.limits.ttlMs, SHARE_MS) });
    if (await pushInTurn()) {
      // On its recipient's stream: the share is for mail that waits for an offline node.
      this.release(key);
      this.stats.delivered++;
      return 'delivered';
    }
    this.stats.queued++;
    return 'queued';
  }

  /** This accept's place among `to`'s: `before` settles when the one accepted before it has pushed. */
  private turn(to: string): Turn {
    const before = this.pushing.get(to) ?? Promise.resolve();
    let done!: () => void;
    const mine = new Promise<void>((resolve) => (done = resolve));
    this.pushing.set(to, mine);
    return {
      before,
      done: () => {
        done();
        if (this.pushing.get(to) === mine) this.pushing.delete(to);
      },
    };
  }

  /**
   * Keeps the envelope in `to`'s mailbox; a full store is swept of expired mail once and asked again.
   * `onKept`: see MailboxStore.put.
   */
  private async keep(to: string, id: string, bytes: Uint8Array, onKept?: () => void): Promise<'kept' | 'full'> {
    const expires = this.now() + this.limits.ttlMs;
    const kept = await this.storage.mailbox.put(to, id, bytes, expires, this.mailLimits, onKept);
    if (kept === 'kept' || this.now() - this.lastFullSweep < 1000) return kept;
    this.lastFullSweep = this.now();
    await this.sweep();
    return this.storage.mailbox.put(to, id, bytes, expires, this.mailLimits, onKept);
  }

  /** Pushes a kept envelope to `to`'s stream, here or (through the bus) on another replica: whether one took it. */
  private async push(to: string, id: string, bytes: Uint8Array): Promise<boolean> {
    let stream = this.streams.get(to);
    // Mail kept before goes first: a stream being flushed (just attached) takes this one after.
    if (stream?.flushing) {
      await stream.flushing;
      stream = this.streams.get(to);
    }
    if (stream) return this.write(to, stream, id, bytes);
    if (!this.bus) return false;
    if (bytes.length <= UPSTREAM_MAX && (await this.bus.deliver(to, bytes))) return true;
    // Too large for the bus, or no replica answered (none holds the stream, or the request timed out, as
    // when this replica's own bus connection dropped): whichever holds the stream lists the mailbox.
    this.bus.mail(to);
    return false;
  }

  /**
   * Writes one kept envelope on a stream of this process: false when the stream is gone or its node is not
   * reading (a recipient that stops reading gets no more than a mailbox's worth of bytes buffered; the
   * rest waits in the mailbox and goes when the stream drains). An acknowledging stream remembers the id;
   * for another the envelope is deleted once written.
   */
  private write(to: string, stream: Stream, id: string, bytes: Uint8Array): boolean {
    const { res } = stream;
    if (res.writableEnded || res.destroyed) return false;
    if (stream.pushed.has(id)) return true;
    if (res.writableLength + bytes.length > this.limits.perRecipientBytes) {
      stream.behind = true;
      return false;
    }
    // Frames pushed in one turn of the event loop leave in one write.
    corkForTurn(res);
    res.write(frame(bytes));
    // Remembered until a flush finds it no longer kept (acked, perhaps through another replica, or
    // deleted once pushed): a flush that listed the mailbox before then does not push it again.
    stream.pushed.set(id, ++stream.pushes);
    if (!stream.acks) void this.acked(to, [id]).catch(() => {});
    if (stream.pushed.size > this.limits.perRecipient) void this.flush(to);
    return true;
  }

  /**
   * Pushes `bytes` (kept by another replica) to `to`'s stream on this process: whether there is one and
   * it took it. The bus calls it on the replica holding the stream.
   */
  pushLocal(to: string, bytes: Uint8Array): boolean {
    const stream = this.streams.get(to);
    return stream ? this.write(to, stream, mailId(bytes), bytes) : false;
  }

  /**
   * Lists `to`'s mailbox and pushes, oldest first, what its stream on this process has not had (at
   * attach, when the stream drains, and when the bus says mail was kept elsewhere). One flush at a time
   * per stream; one asked for meanwhile runs after it.
   */
  flush(to: string): Promise<void> {
    const stream = this.streams.get(to);
    if (!stream) return Promise.resolve();
    if (stream.flushing) {
      stream.again = true;
      return stream.flushing;
    }
    stream.flushing = (async () => {
      do {
        stream.again = false;
        await this.flushOnce(to, stream);
      } while (stream.again && this.streams.get(to) === stream);
    })()
      .catch(() => {})
      .finally(() => (stream.flushing = null));
    return stream.flushing;
  }

  private flushOnce(to: string, stream: Stream): Promise<void> {
    // One listing per recipient at a time, and only for its current stream: a node that opens many
    // streams at once must not have its whole mailbox read into memory once for each.
    return this.listing.run(to, async () => {
      if (this.streams.get(to) !== stream) return;
      await this.listAndPush(to, stream);
    });
  }

  private async listAndPush(to: string, stream: Stream): Promise<void> {
    const before = stream.pushes;
    // Pushed while its write was under way: missing from the list when that write lands after the list
    // is read, though it is kept.
    const unwritten = new Set(this.unwritten);
    const mail = await this.storage.mailbox.list(to, this.now());
    // Pushed before the list and no longer kept: acked, deleted once pushed, or expired. (One pushed
    // since may have been kept after the list was read.)
    const kept = new Set(mail.map((m) => m.id));
    for (const [id, n] of stream.pushed) {
      if (n <= before && !kept.has(id) && !unwritten.has(`${to}!${id}`)) stream.pushed.delete(id);
    }
    for (const m of mail) {
      if (this.streams.get(to) !== stream) return;
      if (stream.pushed.has(m.id)) continue;
      if (!this.write(to, stream, m.id, m.bytes)) return; // not reading: the rest goes when it drains
      this.stats.delivered++;
    }
  }

  /** POST /relay/v2/ack: deletes the named envelopes of `to`'s mailbox; how many were kept. */
  async ack(to: string, ids: string[]): Promise<number> {
    const n = await this.acked(to, ids);
    const stream = this.streams.get(to);
    if (stream) for (const id of ids) stream.pushed.delete(id);
    return n;
  }

  /** Envelopes that leave the mailbox: deleted, and their senders' shares given back. */
  private async acked(to: string, ids: string[]): Promise<number> {
    const n = await this.storage.mailbox.ack(to, ids);
    this.stats.acked += n;
    for (const id of ids) this.release(`${to}!${id}`);
    return n;
  }

  /** Gives back the share an envelope held, if this process holds one. */
  private release(key: string): void {
    const share = this.shares.get(key);
    if (!share) return;
    this.shares.delete(key);
    this.unshare(share.client, share.n);
  }

  private unshare(client: string, n: number): void {
    const left = (this.queuedBy.get(client) ?? 0) - n;
    if (left > 0) this.queuedBy.set(client, left);
    else this.queuedBy.delete(client);
  }

  /** accept(), as the sender is answered: the outcome, or why the envelope was refused. */
  async answer(bytes: Uint8Array, client = ''): Promise<RelayAnswer> {
    // A sealed message is padded to at least 256 bytes and carries a 16-byte tag: anything shorter is no
    // envelope, and tiny ones would let the mailbox's per-envelope memory outgrow its byte bounds.
    if (bytes.length < MIN_ENVELOPE)
      return refused(400, 'BAD_ENVELOPE', `an envelope is at least ${MIN_ENVELOPE} bytes (its sealed message is padded to 256)`);
    let outcome: Awaited<ReturnType<Relay['accept']>>;
    try {
      outcome = await this.accept(bytes, client);
    } catch (err) {
      if (err instanceof EnvelopeRefused || err instanceof CborError) return refused(400, 'BAD_ENVELOPE', err.message);
      throw err;
    }
    if (outcome === 'full') return refused(429, 'QUEUE_FULL', "the recipient's mailbox on this hub is full (or the hub's is); retry later");
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

  /** Deletes expired mail (every minute, and when a bound is met) and forgets the shares it held. */
  private async sweep(): Promise<void> {
    if (this.closed) return;
    const now = this.now();
    try {
      this.stats.expired += await this.storage.mailbox.sweep(now);
    } catch {
      // The store is closing or failing: the next sweep tries again.
      return;
    }
    for (const [key, share] of this.shares) if (share.expires <= now) this.release(key);
    for (const sweep of this.alsoSwept) await sweep().catch(() => {});
  }

  /** Runs `sweep` with every sweep of the mailboxes (each minute), after them. */
  sweepAlso(sweep: () => Promise<unknown>): void {
    this.alsoSwept.push(sweep);
  }

  /**
   * Bytes kept for the envelopes this process accepted and still keeps (the per-client shares; the
   * mailbox's own count, across restarts and replicas, is `storage.mailbox.size()`).
   */
  queuedBytes(): number {
    let n = 0;
    for (const bytes of this.queuedBy.values()) n += bytes;
    return n;
  }

  /** Takes `bytes` of the upload budget for `client` (see Budget): false when there is no room. */
  startUpload(bytes: number, client = ''): boolean {
    return this.uploads.take(client, bytes);
  }

  endUpload(bytes: number, client = ''): void {
    this.uploads.give(client, bytes);
  }

  /**
   * Opens the push stream of an (authenticated) AID and pushes its kept mail, oldest first. `acks`: the
   * node acknowledges what it journaled (`x-anet-ack: 1`); without it each envelope is deleted once pushed.
   */
  attach(aid: string, req: IncomingMessage, res: ServerResponse, acks = false): void {
    this.streams.get(aid)?.res.end();
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'cache-control': 'no-store' });
    res.flushHeaders();
    res.socket?.setNoDelay(true);
    const stream: Stream = {
      res,
      acks,
      pushed: new Map(),
      pushes: 0,
      flushing: null,
      again: false,
      behind: false,
      release: () => {},
    };
    this.streams.set(aid, stream);
    stream.release =
      this.bus?.hold(
        aid,
        (bytes) => this.pushLocal(aid, bytes),
        () => void this.flush(aid),
      ) ?? (() => {});
    const detach = () => {
      if (this.streams.get(aid) !== stream) return;
      this.streams.delete(aid);
      stream.release();
    };
    req.once('close', detach);
    res.once('close', detach);
    res.on('drain', () => {
      if (!stream.behind) return;
      stream.behind = false;
      void this.flush(aid);
    });
    void this.flush(aid);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweeper);
    this.upstreams.close();
    for (const s of this.streams.values()) {
      s.release();
      s.res.end();
    }
    this.streams.clear();
    this.shares.clear();
    this.queuedBy.clear();
    await this.bus?.close();
  }
}

const refused = (status: number, code: string, message: string): RelayAnswer => ({ error: { status, code, message } });
