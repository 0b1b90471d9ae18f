// Automatic payments in any 24 h (SPEC §2.3 `payments.daily_max`, §10): an exact sliding window of
// amounts. SPEND is accepted only when the amounts already in the window plus this one stay within the
// limit; a refused SPEND records nothing. Amounts are canonical decimal strings summed as BigInt (they
// reach 2^63−1, beyond Number). Half-open windows, as the rate buckets: an amount spent at t counts
// while now < t + windowMs.
import { setup, assign, assertEvent } from 'xstate';

export interface SpendContext {
  windowMs: number;
  entries: { at: number; id: string; amount: string }[];
  last: { id: string; accepted: boolean; spent: string } | null;
}

export type SpendEvent =
  | { type: 'SPEND'; at: number; id: string; amount: string; limit: string }
  | { type: 'UNDO'; at: number; id: string };

const inWindow = (c: SpendContext, at: number) => c.entries.filter((e) => at < e.at + c.windowMs);
const total = (entries: SpendContext['entries']) => entries.reduce((sum, e) => sum + BigInt(e.amount), 0n);

export const spendMachine = setup({
  types: { context: {} as SpendContext, events: {} as SpendEvent, input: {} as { windowMs: number } },
  actions: {
    spend: assign(({ context, event }) => {
      assertEvent(event, 'SPEND');
      const entries = inWindow(context, event.at);
      const spent = total(entries);
      const accepted = spent + BigInt(event.amount) <= BigInt(event.limit);
      return {
        entries: accepted ? [...entries, { at: event.at, id: event.id, amount: event.amount }] : entries,
        last: { id: event.id, accepted, spent: (accepted ? spent + BigInt(event.amount) : spent).toString() },
      };
    }),
    undo: assign(({ context, event }) => {
      assertEvent(event, 'UNDO');
      return { entries: context.entries.filter((x) => x.id !== event.id) };
    }),
  },
}).createMachine({
  id: 'spend',
  context: ({ input }) => ({ windowMs: input.windowMs, entries: [], last: null }),
  initial: 'open',
  states: {
    open: { on: { SPEND: { actions: 'spend' }, UNDO: { actions: 'undo' } } },
  },
});
