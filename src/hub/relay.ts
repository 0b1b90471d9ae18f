// The hub relay (SPEC §11, WIRE §4): end-to-end encrypted envelopes in, pushed to the recipient's open
// stream, or queued in memory (bounded, with a TTL) while it is offline. Sends are anonymous — the sender
// is known only inside the ciphertext — and nothing about who talked to whom is ever written to disk.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { envelopeRecipient } from '../relay/envelope.js';

const MIB = 1024 * 1024;

/**
 * The largest padded inner message the relay carries. SPEC §2.1 promises files of up to 8 MiB by default
 * (`files.max_bytes`); as base64 such a file is ~10.7 MiB and envelope.ts `padded` rounds every message up
 * to the next power of two, so one call with one default-sized file is a 16 MiB message. Anything lower
 * breaks that promise; 32 MiB would double what every queued or in-flight envelope may cost the hub.
 */
export const MAX_MESSAGE = 16 * MIB;

/** Room for the outer CBOR map around the ciphertext: recipient AID, kid, enc, AEAD tag, heads (~150 bytes). */
const OUTER_ROOM = 4096;

/** The one envelope limit: the hub's send body, the client's stream frames, the local A2A body all use it. */
export const MAX_ENVELOPE = MAX_MESSAGE + OUTER_ROOM;

/**
 * Room in a message for everything but the files: arguments are counted apart; this covers the sender's
 * KEL and key set, file names and CBOR heads, with a margin for a KEL that grew with rotations.
 */
const MESSAGE_ROOM = 64 * 1024;

/** Whether `count` files of `bytes` bytes each, with `argsBytes` of arguments, fit in one relay message. */
export function filesFit(count: number, bytes: number, argsBytes: number): boolean {
  return count * 4 * Math.ceil(bytes / 3) + argsBytes + MESSAGE_ROOM <= MAX_MESSAGE;
}

/** How many file bytes in all one message carries besides `argsBytes` of arguments (base64 is 4/3). */
export const fileBytesThatFit = (argsBytes: number) => Math.floor((MAX_MESSAGE - MESSAGE_ROOM - argsBytes) / 4) * 3;

/** Sizes in the lines people read: `16 MiB`, `57.3 MiB`. */
export const mib = (bytes: number) => `${Number((bytes / MIB).toFixed(1))} MiB`;

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
  /** Send bodies being received at once, in bytes. */
  uploadBytes: number;
  ttlMs: number;
}

/**
 * Per offline recipient: room for two of the largest envelopes, or for the whole count of typical small
 * ones (a few KiB each); an empty queue always takes one largest envelope.
 */
export const DEFAULT_LIMITS: RelayLimits = { perRecipient: 1000, perRecipientBytes: 2 * MAX_ENVELOPE, totalBytes: 512 * MIB, uploadBytes: 256 * MIB, ttlMs: 10 * 60_000 };

interface Queued {
  bytes: Uint8Array;
  expires: number;
}

/** One frame on a stream: 4-byte big-endian length, then the envelope. */
export function frame(bytes: Uint8Array): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt32BE(bytes.length);
  return Buffer.concat([head, bytes]);
}

const queuedBytes = (queue: Queued[]) => queue.reduce((sum, q) => sum + q.bytes.length, 0);

export class Relay {
  private readonly streams = new Map<string, ServerResponse>();
  private readonly queues = new Map<string, Queued[]>();
  /** Bytes in all queues (expired entries count until they are swept). */
  private queued = 0;
  readonly stats = { delivered: 0, queued: 0, dropped: 0, expired: 0 };

  constructor(private readonly now: () => number, private readonly limits: RelayLimits = DEFAULT_LIMITS) {}

  /** Accepts one envelope: 'delivered' (pushed), 'queued' (recipient offline), or 'full'. */
  accept(bytes: Uint8Array): 'delivered' | 'queued' | 'full' {
    const to = envelopeRecipient(bytes);
    const stream = this.streams.get(to);
    if (stream && !stream.writableEnded) {
      // A recipient that stops reading its stream gets no more than a queue's worth buffered for it.
      if (stream.writableLength + bytes.length > this.limits.perRecipientBytes) return this.drop();
      stream.write(frame(bytes));
      this.stats.delivered++;
      return 'delivered';
    }
    const queue = this.live(to);
    if (queue.length >= this.limits.perRecipient || queuedBytes(queue) + bytes.length > this.limits.perRecipientBytes) return this.drop();
    if (this.queued + bytes.length > this.limits.totalBytes) this.sweep();
    if (this.queued + bytes.length > this.limits.totalBytes) return this.drop();
    queue.push({ bytes, expires: this.now() + this.limits.ttlMs });
    this.queues.set(to, queue);
    this.queued += bytes.length;
    this.stats.queued++;
    return 'queued';
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
      this.queued -= queuedBytes(queue) - queuedBytes(kept);
      if (kept.length) this.queues.set(aid, kept);
      else this.queues.delete(aid);
    }
    return kept;
  }

  /** Drops every expired envelope (queues of recipients nobody sends to again are otherwise kept). */
  private sweep(): void {
    for (const aid of [...this.queues.keys()]) this.live(aid);
  }

  /** Request bodies being received now (declared sizes): see `startUpload`. */
  private uploading = 0;

  /**
   * Reserves room for one send's body before it is read: false when the bodies being received would pass
   * `limits.uploadBytes` (each may be 16 MiB, and anyone may send). A body of unknown size counts as the
   * largest envelope.
   */
  startUpload(declared: number): boolean {
    if (this.uploading + declared > this.limits.uploadBytes) return false;
    this.uploading += declared;
    return true;
  }

  endUpload(declared: number): void {
    this.uploading -= declared;
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
      this.queued -= q.bytes.length;
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
    for (const s of this.streams.values()) s.end();
    this.streams.clear();
    this.queues.clear();
    this.queued = 0;
  }
}
