// In-flight counter (SPEC §2.1, §4.1): calls of one capability (or one caller) running at once.
// A refused START changes nothing; FINISH of an unknown call is ignored, so retries are harmless.
import { setup, assign } from 'xstate';

export interface InflightInput {
  max: number;
}

export interface InflightContext extends InflightInput {
  /** Running call ids and when each started. */
  running: Record<string, number>;
  last: { started: boolean; id: string } | null;
}

export type InflightEvent =
  | { type: 'START'; at: number; id: string }
  | { type: 'FINISH'; at: number; id: string }
  | { type: 'CLEAR'; at: number }
  | { type: 'CONFIGURE'; at: number; input: InflightInput };

const count = (ctx: InflightContext) => Object.keys(ctx.running).length;

export const inflightMachine = setup({
  types: { context: {} as InflightContext, events: {} as InflightEvent, input: {} as InflightInput },
  guards: {
    hasRoom: ({ context, event }) => count(context) < context.max && !(('id' in event) && event.id in context.running),
  },
  actions: {
    start: assign(({ context, event }) => {
      const e = event as Extract<InflightEvent, { type: 'START' }>;
      return { running: { ...context.running, [e.id]: e.at }, last: { started: true, id: e.id } };
    }),
    refuse: assign(({ event }) => ({ last: { started: false, id: (event as Extract<InflightEvent, { type: 'START' }>).id } })),
    finish: assign(({ context, event }) => {
      const { [(event as Extract<InflightEvent, { type: 'FINISH' }>).id]: _gone, ...running } = context.running;
      return { running };
    }),
    clear: assign({ running: {} }),
    configure: assign(({ event }) => ({ max: (event as Extract<InflightEvent, { type: 'CONFIGURE' }>).input.max })),
  },
}).createMachine({
  id: 'inflight',
  context: ({ input }) => ({ ...input, running: {}, last: null }),
  initial: 'idle',
  on: {
    START: [{ guard: 'hasRoom', actions: 'start', target: '.settle' }, { actions: 'refuse', target: '.settle' }],
    FINISH: { actions: 'finish', target: '.settle' },
    CLEAR: { actions: 'clear', target: '.settle' },
    CONFIGURE: { actions: 'configure', target: '.settle' },
  },
  states: {
    idle: {},
    busy: {},
    full: {},
    settle: {
      always: [
        { guard: ({ context }) => count(context) === 0, target: 'idle' },
        { guard: ({ context }) => count(context) >= context.max, target: 'full' },
        { target: 'busy' },
      ],
    },
  },
});
