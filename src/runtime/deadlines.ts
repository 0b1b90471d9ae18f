// Deadlines (SPEC §14): they live in machine context, and the host keeps an index `<deadline>!<actor>`
// (value: the kind) written in the same batch as the event that set or cleared one, so after a restart
// one timer is armed again from the index: an overdue deadline fires at once, a future one at its time.
// A fired deadline is an ordinary journaled `TICK` event sent to each actor due.
import { deadlineKey, timeKey, type Store, type WriteOp } from '../../store/db.js';
import type { Clock } from './clock.js';

/** The index writes for an actor whose deadline moves from `from` to `to` (none when it stays). */
export function deadlineOps(store: Store, actor: string, kind: string, from: number | null, to: number | null, ops: WriteOp[]): void {
  if (from === to) return;
  if (from !== null) ops.push({ type: 'del', sublevel: store.deadlines, key: deadlineKey(from, actor) });
  if (to !== null) ops.push({ type: 'put', sublevel: store.deadlines, key: deadlineKey(to, actor), value: kind });
}

/** One timer for the earliest deadline in the index. */
export class DeadlineTimer {
  private timer: { cancel(): void } | null = null;
  private at = Infinity;
  /** The firing under way (reading the due entries and sending their TICKs), for the host's `idle()`. */
  firing: Promise<void> | null = null;
  private stopped = false;

  constructor(
    private readonly clock: Clock,
    private readonly store: Store,
    /** Sends one actor its TICK; settles when the event is journaled (or refused). */
    private readonly tick: (actor: string, kind: string) => Promise<unknown>,
  ) {}

  /** A deadline was just written: the timer moves when it is earlier than the armed one. */
  written(at: number): void {
    if (at < this.at && !this.stopped) this.arm(at);
  }

  /** Arms the timer for the earliest deadline in the index. */
  async rearm(): Promise<void> {
    let earliest = Infinity;
    for await (const key of this.store.deadlines.keys({ limit: 1 })) earliest = Number(key.slice(0, key.indexOf('!')));
    // Never move an armed timer later on the strength of this read: a commit may have armed an earlier
    // one while it ran. A timer for a deadline since removed fires, finds nothing due, and re-reads.
    const at = Math.min(earliest, this.at);
    if (at !== this.at || this.timer === null) this.arm(at);
  }

  /** Forgets the armed timer and arms it from the index (memory was rebuilt from the store). */
  async reset(): Promise<void> {
    this.arm(Infinity);
    await this.rearm();
  }

  /** No deadline fires from now on (the host is closing). */
  stop(): void {
    this.stopped = true;
    this.arm(Infinity);
  }

  private arm(at: number): void {
    if (this.stopped) at = Infinity;
    this.timer?.cancel();
    this.at = at;
    this.timer = at === Infinity ? null : this.clock.at(at, () => this.fire());
  }

  private fire(): void {
    const firing = this.fireDue().finally(() => {
      if (this.firing === firing) this.firing = null;
    });
    this.firing = firing;
  }

  private async fireDue(): Promise<void> {
    this.timer = null;
    this.at = Infinity;
    if (this.stopped) return;
    const due: [string, string][] = [];
    for await (const [key, kind] of this.store.deadlines.iterator({ lt: `${timeKey(this.clock.now() + 1)}` })) {
      due.push([key.slice(key.indexOf('!') + 1), kind as string]);
    }
    await Promise.all(due.map(([actor, kind]) => this.tick(actor, kind).catch(() => {})));
    await this.rearm();
  }
}
