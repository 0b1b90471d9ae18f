// The caller's task records: the `tasks` sublevel, a bounded memory of the tasks not yet ended (ahead of
// their stored copies while a write is on the way), and whoever waits on a task (`anet call`, `anet pay`).
// Records of many tasks share writes (Store.writeGrouped): they land in the order they were queued, so a
// reply's later write always lands over an earlier one.
import type { Store, WriteOp } from '../../../store/db.js';
import { isFinal, shownAt, type TaskRecord } from './records.js';

/** What the book uses of the store. */
export type BookStore = Pick<Store, 'tasks' | 'writeGrouped'>;

/** Tasks not ended that are kept in memory at most; the oldest fall back to their stored copies. */
const LIVE_MAX = 10_000;

export interface Wait {
  settled: Promise<TaskRecord>;
  /** Drops this wait (another one on the task goes on). */
  cancel(): void;
}

export class TaskBook {
  private readonly live = new Map<string, TaskRecord>();
  private readonly waiters = new Map<string, ((r: TaskRecord) => void)[]>();

  constructor(
    private readonly store: BookStore,
    private readonly now: () => number,
    /** Told of every record written after the first (the caller's live updates, issue 21). */
    private readonly changed: (r: TaskRecord) => void = () => {},
  ) {}

  /** The record as it stands (a quote past its end still says input-required: an answer may yet come). */
  async raw(id: string): Promise<TaskRecord | undefined> {
    return this.live.get(id) ?? ((await this.store.tasks.get(id)) as TaskRecord | undefined);
  }

  /** The record as shown now (`shownAt`). */
  async shown(id: string): Promise<TaskRecord | undefined> {
    const rec = await this.raw(id);
    return rec && shownAt(rec, this.now());
  }

  /** Every record, oldest sent first, as shown now. */
  async all(): Promise<TaskRecord[]> {
    const all = (await this.store.tasks.values().all()) as TaskRecord[];
    // A record in memory may be ahead of its stored copy (its write is on the way).
    return all
      .map((r) => this.live.get(r.task) ?? r)
      .sort((a, b) => a.sentAt - b.sentAt)
      .map((r) => shownAt(r, this.now()));
  }

  /**
   * Records `rec` (with `ops` in the same grouped write): known in memory at once, waiters woken, and
   * resolves once written. An ended task leaves memory then.
   */
  async put(id: string, rec: TaskRecord, ops: WriteOp[] = []): Promise<void> {
    const written = this.write(id, rec, ops);
    this.changed(rec);
    for (const wake of this.waiters.get(id) ?? []) wake(rec);
    await written;
    if (isFinal(rec.state)) this.live.delete(id);
  }

  /** The first write of a task: in memory and on its way, nobody to wake yet. */
  write(id: string, rec: TaskRecord, ops: WriteOp[] = []): Promise<void> {
    this.remember(id, rec);
    return this.store.writeGrouped([{ type: 'put', sublevel: this.store.tasks, key: id, value: rec }, ...ops]);
  }

  /** Bounded: the oldest unanswered tasks fall back to their stored copies. */
  private remember(id: string, rec: TaskRecord): void {
    if (!this.live.has(id) && this.live.size >= LIVE_MAX) this.live.delete(this.live.keys().next().value!);
    this.live.set(id, rec);
  }

  /**
   * Resolves with the record once final (or `enough`), or as it stands after `waitMs` or once `signal`
   * aborts (the one waiting has gone: the task goes on).
   */
  until(
    task: string,
    waitMs: number,
    onUpdate?: (r: TaskRecord) => void,
    enough: (r: TaskRecord) => boolean = () => false,
    signal?: AbortSignal,
  ): Wait {
    let timer: NodeJS.Timeout | undefined;
    let wake!: (r: TaskRecord) => void;
    let giveUp!: () => void;
    const settled = new Promise<TaskRecord>((resolve) => {
      giveUp = async () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', giveUp);
        this.unwait(task, wake);
        // The node may have closed meanwhile (a stop during a long wait): then the record in memory.
        resolve((await this.shown(task).catch(() => this.live.get(task)))!);
      };
      timer = setTimeout(giveUp, waitMs);
      wake = (r: TaskRecord) => {
        onUpdate?.(r);
        if (!isFinal(r.state) && !enough(r)) return;
        clearTimeout(timer);
        signal?.removeEventListener('abort', giveUp);
        this.unwait(task, wake);
        resolve(r);
      };
      // Several may wait on one task (an `anet call` still waiting while `anet pay` runs).
      this.waiters.set(task, [...(this.waiters.get(task) ?? []), wake]);
      if (signal?.aborted) void giveUp();
      else signal?.addEventListener('abort', giveUp, { once: true });
    });
    const cancel = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', giveUp);
      this.unwait(task, wake);
    };
    return { settled, cancel };
  }

  private unwait(task: string, wake: (r: TaskRecord) => void): void {
    const left = (this.waiters.get(task) ?? []).filter((w) => w !== wake);
    if (left.length) this.waiters.set(task, left);
    else this.waiters.delete(task);
  }
}
