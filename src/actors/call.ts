// One inbound call's record (SPEC §4, §9, §10) as a typed actor of kind `call`: the call machine of one
// task, `call/<caller>/<task>`, for capability calls and text tasks alike. The id is made here and
// nowhere else; each method journals one event (with the records written in its batch) and returns
// what the provider reads back, so no caller reads the machine's context untyped.
import type { ActorHost, SendOptions } from '../runtime/host.js';
import type { CallContext, CallEvent } from '../../machines/call.js';

export const callId = (caller: string, task: string) => `call/${caller}/${task}`;

/** The call machine's states (machines/call.ts). */
export type CallValue =
  | 'new'
  | 'submitted'
  | 'working'
  | 'quoted'
  | 'paying'
  | 'settling'
  | 'completed'
  | 'failed'
  | 'rejected'
  | 'canceled';

/** A call as the journal left it. */
export interface CallState {
  value: CallValue;
  /** `done` once the call reached a final state. */
  done: boolean;
  context: CallContext;
}

/** An event as the provider sends it: the host stamps `at`. */
type In<T extends CallEvent['type']> = Omit<Extract<CallEvent, { type: T }>, 'type' | 'at'>;
/** The events that record a service's outcome. */
export type OutcomeEvent =
  | ({ type: 'COMPLETED' } & In<'COMPLETED'>)
  | ({ type: 'FAILED' } & In<'FAILED'>)
  | ({ type: 'SERVICE_REJECTED' } & In<'SERVICE_REJECTED'>);
/** Records written in the batch of an event (the running mark, the kept payload, the inbox entry). */
export type Alongside = NonNullable<SendOptions['alongside']>;

export class Call {
  readonly id: string;

  constructor(
    private readonly host: ActorHost,
    readonly caller: string,
    readonly task: string,
  ) {
    this.id = callId(caller, task);
  }

  /** The call as journaled, or undefined for a task id never seen. */
  async state(): Promise<CallState | undefined> {
    const snapshot = await this.host.state(this.id);
    return snapshot && stateOf(snapshot);
  }

  /**
   * RECEIVED; true when it was the first of this task id. Only the first RECEIVED of a task takes: each
   * delivery draws a random nonce, and the context keeps the one that did.
   */
  async received(e: In<'RECEIVED'>, alongside: Alongside = []): Promise<boolean> {
    return (await this.send({ type: 'RECEIVED', ...e }, alongside)).context.nonce === e.nonce;
  }

  /** REFUSED: an admission check (or, for a paid call, the in-flight slot) said no. */
  async refused(e: In<'REFUSED'>, alongside?: Alongside): Promise<void> {
    await this.send({ type: 'REFUSED', ...e }, alongside);
  }

  /** STARTED (text tasks): the agent or the operator has the task. */
  async started(alongside?: Alongside): Promise<void> {
    await this.send({ type: 'STARTED' }, alongside);
  }

  /** The service's outcome: COMPLETED, FAILED or SERVICE_REJECTED. */
  async outcome(e: OutcomeEvent, alongside?: Alongside): Promise<void> {
    await this.send(e, alongside);
  }

  /** INTERRUPTED: the node stopped while the call ran (or waited for payment). */
  async interrupted(): Promise<void> {
    await this.send({ type: 'INTERRUPTED' });
  }

  /** QUOTED: a priced call waits for payment until `expiresAt`. */
  async quoted(e: In<'QUOTED'>): Promise<void> {
    await this.send({ type: 'QUOTED', ...e });
  }

  /** PAY; true when the quote still stood (the call is `paying`), false when it had expired. */
  async pay(e: In<'PAY'>): Promise<boolean> {
    return (await this.send({ type: 'PAY', ...e })).value === 'paying';
  }

  /** HELD: the hub holds the amount. */
  async held(e: In<'HELD'>): Promise<void> {
    await this.send({ type: 'HELD', ...e });
  }

  /** CANCELED: the caller declined the quote. */
  async canceled(e: In<'CANCELED'>, alongside?: Alongside): Promise<void> {
    await this.send({ type: 'CANCELED', ...e }, alongside);
  }

  /** SETTLED: the hub captured or released the payment. */
  async settled(e: In<'SETTLED'>, alongside?: Alongside): Promise<void> {
    await this.send({ type: 'SETTLED', ...e }, alongside);
  }

  /** TICK: the quote's deadline passed (ends a quote that waits no more). */
  async tick(alongside?: Alongside): Promise<void> {
    await this.send({ type: 'TICK' }, alongside);
  }

  private async send(event: { type: CallEvent['type']; [k: string]: unknown }, alongside?: Alongside): Promise<CallState> {
    return stateOf(await this.host.send(this.id, 'call', undefined, event, alongside ? { alongside } : {}));
  }
}

export const call = (host: ActorHost, caller: string, task: string) => new Call(host, caller, task);

/** The one place a call snapshot is read: the machine is typed by machines/call.ts. */
function stateOf(snapshot: { value: unknown; status: string; context: unknown }): CallState {
  return { value: snapshot.value as CallValue, done: snapshot.status === 'done', context: snapshot.context as CallContext };
}
