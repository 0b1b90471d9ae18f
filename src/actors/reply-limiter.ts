// The card desk's reply limiter (SPEC §6.2): at most 6 answers per sender per 60 s, an exact sliding
// window (the bucket machine, journaled under its own kind `reply-limiter`). Its id is made here only.
import type { ActorHost } from '../runtime/host.js';
import { REPLY_LIMIT } from '../runtime/kinds.js';
import type { BucketContext } from '../../machines/bucket.js';
import { Bucket } from './bucket.js';

export const replyLimiterId = (sender: string) => `reply-limiter/${sender}`;

export class ReplyLimiter {
  private readonly window: Bucket;

  constructor(host: ActorHost, sender: string) {
    this.window = new Bucket(host, replyLimiterId(sender), 'reply-limiter');
  }

  /** Whether a request that arrived at `at` may be answered; past the limit it takes nothing. */
  async admit(at: number): Promise<boolean> {
    return (await this.window.admit(REPLY_LIMIT, { at })).admitted;
  }

  /** The window's context, or undefined before the sender's first request (for tools and tests). */
  context(): Promise<BucketContext | undefined> {
    return this.window.context();
  }
}

export const replyLimiter = (host: ActorHost, sender: string) => new ReplyLimiter(host, sender);
