// The window of automatic payments (kind `spend`, machines/spend.ts): one actor, `spend/auto`, holding
// the amounts the caller paid without asking its operator in the last 24 h (payments.daily_max). The only
// place its id is made; `admit` journals a SPEND and returns whether it fit, `undo` takes one back.
// The host stamps each event's time.
import type { ActorHost } from '../runtime/host.js';
import type { SpendContext } from '../../machines/spend.js';

export const SPEND_KIND = 'spend';
export const AUTO_SPEND_ID = 'spend/auto';
const DAY_MS = 24 * 3_600_000;

/** What the wrapper uses of the host. */
export type SpendHost = Pick<ActorHost, 'send'>;

export interface SpendOutcome {
  accepted: boolean;
  /** The window's total after this SPEND (a refused one adds nothing), a decimal string. */
  spent: string;
}

export interface SpendActor {
  /** SPEND: `amount` for task `id` is admitted when the window's total stays within `limit`. */
  admit(id: string, amount: string, limit: string): Promise<SpendOutcome>;
  /** UNDO: the amount of task `id` leaves the window (it was not paid after all). */
  undo(id: string): Promise<void>;
}

/** The window of automatic payments (payments.daily_max), over 24 h. */
export function autoSpend(host: SpendHost): SpendActor {
  return {
    async admit(id, amount, limit) {
      const snap = await host.send(AUTO_SPEND_ID, SPEND_KIND, { windowMs: DAY_MS }, { type: 'SPEND', id, amount, limit });
      // The one place a spend snapshot is typed: `last` is this SPEND's verdict (events apply one at a time).
      const last = (snap.context as SpendContext).last;
      return { accepted: last?.accepted === true, spent: last?.spent ?? '0' };
    },
    async undo(id) {
      // No input: an UNDO only ever follows a SPEND, which created the actor (as before this wrapper).
      await host.send(AUTO_SPEND_ID, SPEND_KIND, undefined, { type: 'UNDO', id });
    },
  };
}
