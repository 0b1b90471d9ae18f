// The relay's upstream connections (SPEC §11, WIRE §4): a node's sends ride one upgraded connection
// (`GET /relay/v2/upstream`, UPSTREAM_PROTOCOL) as length-prefixed frames, each answered by one frame in
// order. This file reads the frames under the relay's upload budget and deadlines; what to do with each
// envelope is the relay's (src/hub/relay.ts), which keeps it in the mailbox before it answers: answers are
// awaited side by side and written in the order of their frames.
import { corkForTurn } from '../util/stream.js';
import type { Socket } from 'node:net';
import { UPSTREAM_MAX, frame, type RelayAnswer } from '../protocol/relay.js';
import type { Budget } from './budget.js';

/** What an upstream needs of the relay: its upload budget, and its answer to one envelope. */
export interface UpstreamRelay {
  readonly uploads: Budget;
  answer(bytes: Uint8Array, client: string): Promise<RelayAnswer>;
}

/**
 * Envelopes of one upstream being kept at once, and their bytes: past either, reading pauses until one is
 * answered. A frame's bytes stay in the relay's upload budget until its answer is written, so what all
 * upstreams hold while the store writes is bounded hub-wide (and per client) by that budget, and one
 * connection by 1 MiB, four of the largest frames.
 */
const IN_FLIGHT = 64;
const IN_FLIGHT_BYTES = 1024 * 1024;

/** The open upstream connections of one relay, at most `max` at once. */
export class Upstreams {
  private readonly open = new Set<Socket>();

  constructor(
    private readonly relay: UpstreamRelay,
    private readonly max: number,
    private readonly frameTimeoutMs: number,
  ) {}

  /** Whether another upstream may be opened now. */
  room(): boolean {
    return this.open.size < this.max;
  }

  /** Serves one upstream connection of `client`, after the upgrade (`head`: bytes that came with the request). */
  serve(socket: Socket, head: Buffer, client: string): void {
    const connection = new UpstreamConnection(this.relay, socket, this.frameTimeoutMs, client);
    this.open.add(socket);
    socket.once('close', () => {
      this.open.delete(socket);
      connection.closed();
    });
    socket.on('error', () => socket.destroy());
    // The server's sockets allow half-open connections, and an upgraded one has no HTTP handling left:
    // a node that closes its side would leave this one (and any budget its frame held) open for ever.
    socket.once('end', () => socket.destroy());
    socket.on('data', (chunk: Buffer) => connection.received(chunk));
    if (head.length) connection.received(head);
  }

  close(): void {
    // Upgraded connections are the relay's own: the HTTP server no longer tracks them.
    for (const socket of this.open) socket.destroy();
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
  /** Answers not written yet: each frame's in order, whenever the relay settles it. */
  private answers: Promise<void> = Promise.resolve();
  private inFlight = 0;
  private inFlightBytes = 0;
  /** While paused: whether a drain will resume reading, and the timer that drops a client reading no answers. */
  private awaitingDrain = false;
  private stalled: NodeJS.Timeout | null = null;

  constructor(
    private readonly relay: UpstreamRelay,
    private readonly socket: Socket,
    private readonly frameTimeoutMs: number,
    private readonly client: string,
  ) {}

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
    this.ended = true;
    if (this.stalled) clearTimeout(this.stalled);
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
        this.skipping -= n;
        if (this.skipping === 0) this.stopDeadline();
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
        this.headFilled += n;
        if (this.headFilled === 4) this.begin(this.head.readUInt32BE(0));
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
      // After the answers before it (and this one) are written.
      this.answers = this.answers.then(() => {
        this.socket.end();
        setTimeout(() => this.socket.destroy(), 1000).unref();
      });
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
    this.stopDeadline();
    let body: Buffer;
    if (pieces.length === 1) body = pieces[0]!;
    else {
      body = Buffer.allocUnsafeSlow(length);
      let at = 0;
      for (const p of pieces) at += p.copy(body, at);
    }
    // In flight until its answer is written (its bytes still taken from the upload budget): answers
    // settled but not written count too.
    this.inFlight++;
    this.inFlightBytes += length;
    const answered = this.relay
      .answer(new Uint8Array(body.buffer, body.byteOffset, body.length), this.client)
      .catch((err: Error): RelayAnswer => refused(500, 'INTERNAL', err.message));
    this.answer(answered, length);
  }

  /** Writes an answer once every answer before it is written (frames are answered in order). */
  private answer(answer: RelayAnswer | Promise<RelayAnswer>, inFlight?: number): void {
    this.answers = this.answers.then(async () => {
      const a = await answer;
      if (!this.socket.destroyed) {
        // Answers written in one turn of the event loop leave in one write.
        corkForTurn(this.socket);
        this.socket.write(frame(Buffer.from(JSON.stringify(a))));
      }
      if (inFlight !== undefined) {
        this.inFlight--;
        this.inFlightBytes -= inFlight;
        this.relay.uploads.give(this.client, inFlight);
      }
      this.resume();
    });
  }

  /** Whether reading must wait: answers wait to be written, or too many envelopes wait for theirs. */
  private mustWait(): boolean {
    return this.socket.writableNeedDrain || this.inFlight >= IN_FLIGHT || this.inFlightBytes >= IN_FLIGHT_BYTES;
  }

  /** Pauses reading when it must wait (the rest of the chunk is kept in `pending` by the caller). */
  private blocked(): boolean {
    if (this.ended || !this.mustWait()) return false;
    this.socket.pause();
    // Paused, the hub would not even see the client close: one that reads no answers for this long goes.
    if (!this.stalled) {
      this.stalled = setTimeout(() => this.socket.destroy(), this.frameTimeoutMs);
      this.stalled.unref();
    }
    this.wakeOnDrain();
    return true;
  }

  private wakeOnDrain(): void {
    if (!this.socket.writableNeedDrain || this.awaitingDrain) return;
    this.awaitingDrain = true;
    this.socket.once('drain', () => {
      this.awaitingDrain = false;
      this.resume();
    });
  }

  /** Reading goes on, with the rest of the chunk, once it need not wait (after a drain, or an answer). */
  private resume(): void {
    if (this.pending === null || this.socket.destroyed) return;
    if (this.mustWait()) {
      this.wakeOnDrain();
      return;
    }
    if (this.stalled) clearTimeout(this.stalled);
    this.stalled = null;
    const rest = this.pending;
    this.pending = null;
    this.socket.resume();
    this.received(rest);
  }

  private stopDeadline(): void {
    if (this.deadline) clearTimeout(this.deadline);
    this.deadline = null;
  }
}
