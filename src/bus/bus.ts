// The peer-message bus: an RxJS pipeline from the relay to handlers (actors), with bounded concurrency
// and a bounded backlog so a flood of peer messages cannot exhaust memory. A failing handler is counted
// and reported, never fatal to the stream.
import { Subject, defer, mergeMap, catchError, EMPTY, type Subscription } from 'rxjs';

export interface PeerMessage {
  /** Sender AID (verified from the envelope). */
  from: string;
  type: string;
  body: unknown;
  /** Receive time, stamped by the relay client. */
  at: number;
}

export interface BusOptions {
  /** Handlers running at once. */
  concurrency?: number;
  /** Messages waiting for a handler; beyond this `publish` refuses. */
  maxBacklog?: number;
}

export class Bus<T = PeerMessage> {
  private readonly input = new Subject<T>();
  private readonly concurrency: number;
  private readonly maxBacklog: number;
  private waiting = 0;
  private subscription: Subscription | null = null;
  readonly stats = { delivered: 0, failed: 0, dropped: 0 };

  constructor(private readonly opts: BusOptions & { onError?(err: unknown, message: T): void } = {}) {
    this.concurrency = opts.concurrency ?? 32;
    this.maxBacklog = opts.maxBacklog ?? 10_000;
  }

  /** Starts delivering messages to `handler`. */
  start(handler: (message: T) => Promise<void> | void): void {
    if (this.subscription) throw new Error('the bus is already started');
    this.subscription = this.input
      .pipe(
        mergeMap(
          (message) =>
            defer(async () => {
              this.waiting--;
              await handler(message);
              this.stats.delivered++;
            }).pipe(
              catchError((err) => {
                this.stats.failed++;
                this.opts.onError?.(err, message);
                return EMPTY;
              }),
            ),
          this.concurrency,
        ),
      )
      .subscribe();
  }

  /** Queues a message; false (and counted as dropped) when the backlog is full. */
  publish(message: T): boolean {
    if (!this.subscription) throw new Error('the bus is not started');
    if (this.waiting >= this.maxBacklog) {
      this.stats.dropped++;
      return false;
    }
    this.waiting++;
    this.input.next(message);
    return true;
  }

  stop(): void {
    this.subscription?.unsubscribe();
    this.subscription = null;
  }
}
