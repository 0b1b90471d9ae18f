// The hub relay (SPEC §11, WIRE §4): end-to-end encrypted envelopes in, pushed to the recipient's open
// stream, or queued in memory (bounded, with a TTL) while it is offline. Sends are anonymous — the sender
// is known only inside the ciphertext — and nothing about who talked to whom is ever written to disk.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { envelopeRecipient } from '../relay/envelope.js';

export const MAX_ENVELOPE = 2 * 1024 * 1024;

export interface RelayLimits {
  perRecipient: number;
  ttlMs: number;
}

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

export class Relay {
  private readonly streams = new Map<string, ServerResponse>();
  private readonly queues = new Map<string, Queued[]>();
  readonly stats = { delivered: 0, queued: 0, dropped: 0, expired: 0 };

  constructor(private readonly now: () => number, private readonly limits: RelayLimits = { perRecipient: 1000, ttlMs: 10 * 60_000 }) {}

  /** Accepts one envelope: 'delivered' (pushed), 'queued' (recipient offline), or 'full'. */
  accept(bytes: Uint8Array): 'delivered' | 'queued' | 'full' {
    const to = envelopeRecipient(bytes);
    const stream = this.streams.get(to);
    if (stream && !stream.writableEnded) {
      stream.write(frame(bytes));
      this.stats.delivered++;
      return 'delivered';
    }
    const queue = this.live(to);
    if (queue.length >= this.limits.perRecipient) {
      this.stats.dropped++;
      return 'full';
    }
    queue.push({ bytes, expires: this.now() + this.limits.ttlMs });
    this.queues.set(to, queue);
    this.stats.queued++;
    return 'queued';
  }

  private live(aid: string): Queued[] {
    const now = this.now();
    const queue = this.queues.get(aid) ?? [];
    const kept = queue.filter((q) => q.expires > now);
    this.stats.expired += queue.length - kept.length;
    return kept;
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
  }
}
