// The caller's side of one payment (SPEC §10) as a typed actor of kind `payment`, per provider and task:
// `payment/<provider>/<task>`. The id is made here and nowhere else; each method journals one event
// (with the records written in its batch) and returns the payment as the journal left it.
import type { ActorHost, SendOptions } from '../runtime/host.js';
import type { PaymentContext, PaymentEvent } from '../../machines/payment.js';

export const paymentId = (provider: string, task: string) => `payment/${provider}/${task}`;

/** The payment machine's states (machines/payment.ts). */
export type PaymentValue = 'new' | 'quoted' | 'authorized' | 'completed' | 'failed' | 'rejected' | 'expired' | 'abandoned';

export interface PaymentState {
  value: PaymentValue;
  done: boolean;
  context: PaymentContext;
}

/** An event as the caller sends it: the host stamps `at` unless it is given. */
type In<T extends PaymentEvent['type']> = Omit<Extract<PaymentEvent, { type: T }>, 'type' | 'at'>;
type Alongside = NonNullable<SendOptions['alongside']>;

export class Payment {
  readonly id: string;

  constructor(
    private readonly host: ActorHost,
    readonly provider: string,
    readonly task: string,
  ) {
    this.id = paymentId(provider, task);
  }

  async state(): Promise<PaymentState | undefined> {
    const snapshot = await this.host.state(this.id);
    return snapshot && stateOf(snapshot);
  }

  /** QUOTE: the provider's quote arrived (input-required). */
  quote(e: In<'QUOTE'>): Promise<PaymentState> {
    return this.send({ type: 'QUOTE', ...e });
  }

  /** AUTHORIZE: the signed authorization goes out (its nonce and validBefore journaled first). */
  authorize(e: In<'AUTHORIZE'>, alongside?: Alongside): Promise<PaymentState> {
    return this.send({ type: 'AUTHORIZE', ...e }, alongside);
  }

  /** REJECT: the operator declined the quote. */
  reject(): Promise<PaymentState> {
    return this.send({ type: 'REJECT' });
  }

  /** SETTLED: the provider's final answer said what the hub did. */
  settled(e: In<'SETTLED'>, alongside?: Alongside): Promise<PaymentState> {
    return this.send({ type: 'SETTLED', ...e }, alongside);
  }

  /** ABANDON at `at`: the provider never answered; taken only once UNANSWERED_MS have passed. */
  abandon(at: number, alongside?: Alongside): Promise<PaymentState> {
    return this.send({ type: 'ABANDON', at }, alongside);
  }

  private async send(event: { type: PaymentEvent['type']; [k: string]: unknown }, alongside?: Alongside): Promise<PaymentState> {
    return stateOf(await this.host.send(this.id, 'payment', undefined, event, alongside ? { alongside } : {}));
  }
}

export const payment = (host: ActorHost, provider: string, task: string) => new Payment(host, provider, task);

function stateOf(snapshot: { value: unknown; status: string; context: unknown }): PaymentState {
  return { value: snapshot.value as PaymentValue, done: snapshot.status === 'done', context: snapshot.context as PaymentContext };
}
