// The concurrency gate of one capability's admissions (SPEC §4.1): a call refused by one window must not
// hold another slot (a shared window, the in-flight count) that a concurrent call of another caller
// needs. Admissions take their turn in one of two ways:
// - exclusive: alone, after every admission under way has decided — what paid calls do, and what a free
//   call falls back to (see slots.ts);
// - shared (free calls): all its events go to the journal at once, beside other shared admissions, so
//   admissions do not wait for each other's journal writes. A refused one gives back what it took, and
//   its ticket says whether it did (so a later refusal knows whether it was decided against a slot that
//   was then given back).
// Plain objects owned by the provider (one Gates per node): no journal, no timers.

export interface Ticket {
  /** Its events are queued (only such a ticket's holds can be seen by later admissions). */
  sent: boolean;
  /** Resolves once it has queued its give-back (true) or kept everything it took (false). */
  readonly decided: Promise<boolean>;
  /** Says how it ended, once: later calls change nothing. */
  decide(gaveBack: boolean): void;
}

export class Gate {
  /** Shared admissions that have not decided yet. */
  readonly open = new Set<Ticket>();
  private exclusives = 0;
  private tail: Promise<void> = Promise.resolve();
  private waiting: (() => void)[] = [];

  /** A shared admission's ticket, once no exclusive admission waits or runs. */
  async enter(): Promise<Ticket> {
    while (this.exclusives > 0) await new Promise<void>((resolve) => this.waiting.push(resolve));
    let decide!: (gaveBack: boolean) => void;
    const ticket: Ticket = { sent: false, decided: new Promise<boolean>((resolve) => (decide = resolve)), decide: () => {} };
    ticket.decide = (gaveBack) => {
      if (!this.open.delete(ticket)) return;
      decide(gaveBack);
    };
    this.open.add(ticket);
    return ticket;
  }

  /** The shared admissions whose events were queued before `ticket`'s (their holds may have refused it). */
  sentBefore(ticket: Ticket): Ticket[] {
    return [...this.open].filter((t) => t !== ticket && t.sent);
  }

  /** Runs `fn` alone: after earlier exclusive ones and once every shared admission under way decided. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    this.exclusives++;
    const run = this.tail.then(async () => {
      while (this.open.size > 0) await Promise.all([...this.open].map((t) => t.decided));
      return fn();
    });
    this.tail = run.then(
      () => this.left(),
      () => this.left(),
    );
    return run;
  }

  private left(): void {
    if (--this.exclusives > 0) return;
    const waiting = this.waiting;
    this.waiting = [];
    for (const resolve of waiting) resolve();
  }
}

/** The gates of a node's capabilities, one per capability id, made on first use. */
export class Gates {
  private readonly byCapability = new Map<string, Gate>();

  of(capability: string): Gate {
    const gate = this.byCapability.get(capability);
    if (gate) return gate;
    const made = new Gate();
    this.byCapability.set(capability, made);
    return made;
  }
}
