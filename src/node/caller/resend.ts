// Resends (PROTOCOL §6.4): a task the provider has not answered is sent again with the same task id on a
// bounded backoff (the provider answers a repeat from its journal and never runs it twice), so a task lost
// on the way or an answer lost after it was journaled is asked for again; a provider that stays silent
// ends the task `failed`, `outcome_unknown`. The request waits in payloads `outbox/<task>` until the
// provider's first answer (after that a resend is a status poll); the entry goes with the record that
// ends the resends. The schedule itself is in memory, one clock timer per task, rebuilt from the outbox
// at start (`resume`). Nothing here is journaled: these are records (see records.ts). The keys of a
// request's files wait beside the store, not in it (file-keys.ts), and are deleted with the request.
import { join } from 'node:path';
import type { Store, WriteOp } from '../../../store/db.js';
import { FileKeys, keysSetAside } from './file-keys.js';
import { systemClock, type Clock } from '../../runtime/clock.js';
import { resendsOver, type TaskRecord } from './records.js';
import { fileRefsOf, sendTask, wireBody, type Request, type TaskSender } from './send.js';

/**
 * A task not answered is sent again 5 s after it was sent, then after 15 s, 45 s, 135 s, 405 s, and from
 * then every 1215 s (about 20 min) while it has not ended. A provider silent for RESEND_SILENT_MS since
 * the task was sent (5 resends) ends it `failed`, `outcome_unknown`; one that said it has the task
 * (`working`) is polled for RESEND_SILENT_WORKING_MS of silence before that.
 */
export const RESEND_FIRST_MS = 5_000;
export const RESEND_FACTOR = 3;
export const RESEND_MAX_MS = 1_215_000;
export const RESEND_SILENT_MS = 30 * 60_000;
export const RESEND_SILENT_WORKING_MS = 24 * 3_600_000;
/** The wait after the n-th send of a task (the first is n = 1). */
export const resendDelay = (n: number) => Math.min(RESEND_FIRST_MS * RESEND_FACTOR ** (n - 1), RESEND_MAX_MS);
/** Said when the caller gives up on a silent provider (reason `outcome_unknown`). */
export const UNANSWERED_DETAIL = 'the provider never answered the task or its 5 resends over 30 minutes; it may have run it';
/** Said when a request's file keys cannot be read back to send it again (outbox-keys/<task> lost or damaged). */
export const KEYS_LOST_DETAIL = 'the keys of its files could not be read back to send the task again; the provider may have run it';
export const SILENT_DETAIL =
  'the provider said it was working on the task, then nothing for 24 hours despite resends; its outcome is unknown';

/** The outbox entry of a task that has not ended: the request until the provider answered, then null. */
export interface Outbox {
  to: string;
  request: Request | null;
}

const OUTBOX = 'outbox/';

/** A task's resend schedule, in memory. */
interface Schedule {
  to: string;
  /** Sends since this process took the task on (the first included). */
  sends: number;
  lastSentAt: number;
  /** Since when the provider has said nothing about the task. */
  quietSince: number;
  /** The provider has answered: it holds the task, so a resend is a status poll without the request. */
  heard: boolean;
  timer: { cancel(): void } | null;
}

export interface ResendParts {
  store: Pick<Store, 'payloads' | 'writeGrouped' | 'dataDir'>;
  now: () => number;
  messenger: () => Promise<TaskSender>;
  /** Timers for resends (the node's clock; tests move it). */
  clock?: Pick<Clock, 'at'>;
}

/** What resending asks of the task records. */
export interface ResendRecords {
  /** Runs `fn` in the task's turn: one change of a task at a time. */
  turn(task: string, fn: () => Promise<void>): Promise<void>;
  record(task: string): Promise<TaskRecord | undefined>;
  /** The provider stayed silent: the task ends `failed`, `outcome_unknown`, saying `detail`. */
  giveUp(task: string, rec: TaskRecord, detail: string, at: number): Promise<void>;
}

export class Resends {
  private readonly schedules = new Map<string, Schedule>();
  private closed = false;
  /** The keys of waiting requests' files, beside the store. */
  private readonly keys: FileKeys;
  /** Tasks whose waiting request has keys set aside. */
  private readonly keyed = new Set<string>();
  /** Of those, the ones whose request was let go by a write not landed yet: their keys go once it has. */
  private readonly letGo = new Set<string>();
  /** Resends sent and tasks given up by this process (tests read them). */
  readonly stats = { resent: 0, gaveUp: 0 };

  constructor(
    private readonly parts: ResendParts,
    private readonly records: ResendRecords,
  ) {
    this.keys = new FileKeys(join(parts.store.dataDir, 'outbox-keys'));
  }

  /** The outbox entry of a task about to be sent (written with its first record); its files' keys are set aside first. */
  async keep(task: string, entry: Outbox): Promise<WriteOp> {
    // Known as keyed before its keys are written, so a resume() under way never takes them for a leftover.
    if (entry.request && fileRefsOf(entry.request).length) this.keyed.add(task);
    try {
      const request = entry.request && (await this.keys.setAside(task, entry.request));
      return this.entry(task, { ...entry, request });
    } catch (err) {
      this.keyed.delete(task);
      await this.keys.drop(task).catch(() => {});
      throw err;
    }
  }

  private entry(task: string, entry: Outbox): WriteOp {
    return { type: 'put', sublevel: this.parts.store.payloads, key: OUTBOX + task, value: entry };
  }

  /** Once the write with the ops of heard() or stop() for `task` has landed: the keys of its request are deleted. */
  async dropLetGo(task: string): Promise<void> {
    if (this.letGo.delete(task)) await this.keys.drop(task).catch(() => {});
  }

  private letRequestGo(task: string): void {
    if (this.keyed.delete(task)) this.letGo.add(task);
  }

  /** A task was sent at `at`: its first resend is armed. */
  sent(task: string, to: string, at: number): void {
    this.schedule(task, { to, sends: 1, lastSentAt: at, quietSince: at, heard: false, timer: null });
  }

  /** The provider answered: it holds the task, so the request need not be kept or sent again. */
  heard(task: string): WriteOp[] {
    const r = this.schedules.get(task);
    if (!r) return [];
    r.quietSince = this.parts.now();
    if (r.heard) return [];
    r.heard = true;
    this.letRequestGo(task);
    return [this.entry(task, { to: r.to, request: null })];
  }

  /** No more resends of a task; its outbox entry goes (in the write of the record that ends them). */
  stop(task: string): WriteOp[] {
    this.schedules.get(task)?.timer?.cancel();
    this.schedules.delete(task);
    this.letRequestGo(task);
    return [{ type: 'del', sublevel: this.parts.store.payloads, key: OUTBOX + task }];
  }

  /** Arms a task's next resend: `resendDelay` after its last send. */
  private schedule(task: string, r: Schedule): void {
    if (this.closed) return;
    r.timer?.cancel();
    this.schedules.set(task, r);
    r.timer = (this.parts.clock ?? systemClock).at(
      r.lastSentAt + resendDelay(r.sends),
      () => void this.due(task, r).catch(() => this.again(task, r)),
    );
  }

  /** A resend that failed (the store could not be read): tried again a backoff later, so the task is never left without one. */
  private again(task: string, r: Schedule): void {
    if (this.closed || this.schedules.get(task) !== r || r.timer) return;
    r.lastSentAt = this.parts.now();
    this.schedule(task, r);
  }

  /** A resend is due: the task goes again, or, after too long a silence, ends `outcome_unknown`. */
  private async due(task: string, r: Schedule): Promise<void> {
    await this.records.turn(task, async () => {
      if (this.closed || this.schedules.get(task) !== r) return;
      r.timer = null;
      const rec = await this.records.record(task);
      if (!rec || resendsOver(rec)) {
        await this.parts.store.writeGrouped(this.stop(task));
        await this.dropLetGo(task);
        return;
      }
      const now = this.parts.now();
      if (now - r.quietSince >= (r.heard ? RESEND_SILENT_WORKING_MS : RESEND_SILENT_MS)) {
        this.stats.gaveUp++;
        await this.records.giveUp(task, rec, r.heard ? SILENT_DETAIL : UNANSWERED_DETAIL, now);
        return;
      }
      const stored = r.heard ? undefined : ((await this.parts.store.payloads.get(OUTBOX + task)) as Outbox | undefined);
      let request: Request | null = null;
      try {
        request = stored?.request ? await this.keys.restore(task, stored.request) : null;
      } catch (err) {
        // Sent without its keys it could not run, and they will not come back: ended now, saying why.
        this.stats.gaveUp++;
        await this.records.giveUp(task, rec, `${KEYS_LOST_DETAIL} (${(err as Error).message})`, now);
        return;
      }
      r.sends++;
      r.lastSentAt = now;
      this.schedule(task, r);
      this.stats.resent++;
      const body = wireBody(task, request, r.sends - 1);
      // Not awaited under the task's turn: a reply must not wait for a large upload.
      void this.parts
        .messenger()
        .then((m) => sendTask(m, r.to, body))
        .catch(() => {});
    });
  }

  /**
   * At start, once the relay is open: every task that has not ended and was not quoted is sent again on
   * the schedule, from now (a restart gives the provider the whole schedule again, and a task it said it
   * holds keeps the silence counted from its last answer). Returns how many.
   */
  async resume(): Promise<number> {
    const now = this.parts.now();
    let n = 0;
    const waiting = new Set<string>();
    for await (const [key, value] of this.parts.store.payloads.iterator({ gte: OUTBOX, lt: `${OUTBOX}\uffff` })) {
      const task = String(key).slice(OUTBOX.length);
      const entry = value as Outbox;
      if (entry.request) waiting.add(task);
      if (entry.request && keysSetAside(entry.request)) this.keyed.add(task);
      if (this.closed) break;
      if (this.schedules.has(task)) continue;
      const rec = await this.records.record(task);
      if (!rec || resendsOver(rec)) {
        waiting.delete(task);
        await this.parts.store.writeGrouped(this.stop(task));
        await this.dropLetGo(task);
        continue;
      }
      const heard = entry.request === null;
      const quietSince = heard ? Math.max(rec.updatedAt, now - RESEND_SILENT_WORKING_MS + RESEND_SILENT_MS) : now;
      this.schedule(task, { to: entry.to, sends: 1, lastSentAt: now, quietSince, heard, timer: null });
      n++;
    }
    // Keys whose request is no longer waiting (a crash came between the two writes) go now; not those of
    // a task sent while this ran.
    if (!this.closed) await this.keys.dropUnless((task) => waiting.has(task) || this.keyed.has(task));
    return n;
  }

  /** Stops every resend timer (the node is closing). */
  close(): void {
    this.closed = true;
    for (const r of this.schedules.values()) r.timer?.cancel();
    this.schedules.clear();
  }
}
