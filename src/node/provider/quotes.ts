// The quotes waiting for payment (SPEC §10): a priced call's arguments and files live only here, in
// memory, from its quote until its `task.pay`, its `task.cancel` or the quote's end (10 minutes; a restart
// ends the call `interrupted`, nothing charged). Owned by the provider, one per node. Their number is
// bounded like running calls are: `max_inflight` and `per_caller_inflight`, times four.
import type { OfferedCapability } from '../../config/check.js';
import type { Call } from '../../actors/call.js';
import type { FileOut } from './checks.js';
import type { Running } from './record.js';

export interface Quoted {
  record: Call;
  call: Running;
  argsText: string;
  capability: OfferedCapability;
  files: FileOut[];
  listed: boolean;
  /** Gives back the quota windows the quote took (a paid call refused later consumes no quota). */
  undoQuota: () => Promise<void>;
}

/** Quotes waiting for payment, per capability and per caller, at most this many times its in-flight limits. */
export const WAITING_PER_INFLIGHT = 4;

export class WaitingQuotes {
  private readonly waiting = new Map<string, { quote: Quoted; timer: NodeJS.Timeout }>();

  /** How many quotes wait now. */
  get size(): number {
    return this.waiting.size;
  }

  /** Null when `caller` may be quoted for `cap` now; else which limit the waiting quotes reached. */
  roomFor(cap: OfferedCapability, caller: string): 'max_inflight' | 'caller_inflight' | null {
    let all = 0;
    let mine = 0;
    for (const { quote } of this.waiting.values()) {
      if (quote.capability.id !== cap.id) continue;
      all++;
      if (quote.call.caller === caller) mine++;
    }
    if (all >= cap.inbound.max_inflight * WAITING_PER_INFLIGHT) return 'max_inflight';
    if (mine >= cap.inbound.per_caller_inflight * WAITING_PER_INFLIGHT) return 'caller_inflight';
    return null;
  }

  /**
   * Keeps a quote for `forMs`; past that it is let go and `expired` runs (unless it was taken first).
   * The call machine ends the quote at its own deadline: this only lets go of the arguments.
   */
  hold(quote: Quoted, forMs: number, expired: () => void): void {
    const key = quote.record.id;
    const timer = setTimeout(() => this.take(key) && expired(), forMs);
    timer.unref();
    this.waiting.set(key, { quote, timer });
  }

  /** Takes a quote out (once: a second payment of the same task finds nothing). */
  take(callId: string): Quoted | undefined {
    const held = this.waiting.get(callId);
    this.waiting.delete(callId);
    clearTimeout(held?.timer);
    return held?.quote;
  }
}
