// The quota windows (SPEC §4.1) as typed actors of kind `bucket`: an exact sliding window per capability
// and caller (per minute, per day) and per capability for everyone (per minute). The ids of these actors
// are made here and nowhere else; callers get an ADMIT's outcome, never the machine's context.
import type { ActorHost, SendOptions } from '../runtime/host.js';
import type { BucketContext, BucketInput } from '../../machines/bucket.js';

/** An ADMIT's outcome: the stamp an UNDO gives back, or how long until the window has room. */
export type BucketOutcome = { admitted: true; stamp: number } | { admitted: false; retryAfterMs: number };

/** The quota windows of one capability and caller, by actor id. */
export const quotaIds = (capability: string, caller: string) => ({
  callerMin: `quota/${capability}/${caller}/min`,
  callerDay: `quota/${capability}/${caller}/day`,
  globalMin: `quota/${capability}/global/min`,
});

/** A bucket machine under a kind of its own name (`bucket`, or `reply-limiter` for the card desk). */
export class Bucket {
  constructor(
    private readonly host: ActorHost,
    readonly id: string,
    private readonly kind = 'bucket',
  ) {}

  /** Counts a call in the window when it has room (created with `limits` on first use). */
  async admit(limits: BucketInput, opts: { at?: number } & SendOptions = {}): Promise<BucketOutcome> {
    const { at, ...send } = opts;
    const event = at === undefined ? { type: 'ADMIT' } : { type: 'ADMIT', at };
    const snapshot = await this.host.send(this.id, this.kind, limits, event, send);
    return outcomeOf(snapshot.context as BucketContext);
  }

  /** Gives back the slot an ADMIT took (its stamp). */
  async undo(stamp: number): Promise<void> {
    await this.host.send(this.id, this.kind, undefined, { type: 'UNDO', stamp });
  }

  /** The window's context, or undefined before its first event (for tools and tests). */
  async context(): Promise<BucketContext | undefined> {
    return (await this.host.state(this.id))?.context as BucketContext | undefined;
  }
}

export const bucket = (host: ActorHost, id: string) => new Bucket(host, id);

/** `last` after an ADMIT is always set: the machine writes it on both of ADMIT's transitions. */
function outcomeOf(ctx: BucketContext): BucketOutcome {
  const last = ctx.last!;
  return last.admitted ? { admitted: true, stamp: last.stamp } : { admitted: false, retryAfterMs: last.retryAfterMs };
}
