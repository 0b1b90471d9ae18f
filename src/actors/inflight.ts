// The in-flight counts (SPEC §4.1) as typed actors of kind `inflight`: one per capability, counting its
// running calls and each caller's at once (so a START is checked against both limits in one step). The
// id is made here and nowhere else; callers get a START's outcome, never the machine's context.
import type { ActorHost } from '../runtime/host.js';
import type { InflightContext, InflightInput } from '../../machines/inflight.js';

/** A START's outcome: a slot taken, or which count was full (the whole one is checked first). */
export type StartOutcome = { started: true } | { started: false; full: 'max' | 'caller' };

export const inflightId = (capability: string) => `inflight/${capability}`;

export class Inflight {
  readonly id: string;

  constructor(
    private readonly host: ActorHost,
    capability: string,
  ) {
    this.id = inflightId(capability);
  }

  /** Takes a slot for call `id` of `caller` when both counts have room (created with `limits` on first use). */
  async start(limits: InflightInput, id: string, caller: string): Promise<StartOutcome> {
    const snapshot = await this.host.send(this.id, 'inflight', limits, { type: 'START', id, caller });
    const last = (snapshot.context as InflightContext).last;
    return last?.started ? { started: true } : { started: false, full: last?.full === 'caller' ? 'caller' : 'max' };
  }

  /** Gives call `id`'s slot back (an unknown id changes nothing, so a retry is harmless). */
  async finish(id: string): Promise<void> {
    await this.host.send(this.id, 'inflight', undefined, { type: 'FINISH', id });
  }

  /** Empties the counts: at start nothing runs yet, so no slot can leak across a stop. */
  async clear(limits: InflightInput): Promise<void> {
    await this.host.send(this.id, 'inflight', limits, { type: 'CLEAR' });
  }

  /** The running call ids and when each started (for tools and tests); empty before the first event. */
  async running(): Promise<Record<string, number>> {
    return ((await this.host.state(this.id))?.context as InflightContext | undefined)?.running ?? {};
  }
}

export const inflight = (host: ActorHost, capability: string) => new Inflight(host, capability);
