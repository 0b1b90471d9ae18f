// The caller's side of a task (SPEC §9, PROTOCOL §6.4–6.7, §7), what the node calls. Top to bottom:
//   send / call     a new record (records.ts) with its outbox entry, one `task.send` (send.ts), resends armed (resend.ts)
//   onReply         `task.status` / `task.result` from the provider asked → the next record (answers.ts)
//   decide          a quote → the auto-pay rule (payment.ts: the payment and spend actors journal it)
//   pay / reject    the operator's answer to a quote left to them
//   resume, resendPayments   at start: tasks not answered go out again, authorized payments are sent again
//   cancel / watch  the operator (or a local client) stops a task, or follows it (issue 21)
// Every record change is `next(record, event)` of records.ts, written through the book (book.ts), one
// change of a task at a time (a status and a result arriving together must not cross). Each change, and
// each preview the provider sends (never written anywhere), is a TaskUpdate on `updates`.
import type { Store, WriteOp } from '../../../store/db.js';
import type { Messenger, MessageHandler } from '../../relay/messenger.js';
import type { Reader } from '../../reader/reader.js';
import { fromBody } from '../../protocol/body.js';
import { CHAT } from '../../protocol/messages.js';
import { KeyedSerial } from '../../runtime/serial.js';
import type { Clock } from '../../runtime/clock.js';
import { Contacts } from '../../contacts/credential.js';
import { randomHex } from '../../util/random.js';
import { PaymentError, type Payer, type PaymentRecord } from './payment.js';
import { awaitingOperator, isFinal, newRecord, next, resendsOver, type TaskEvent, type TaskRecord, type TaskState } from './records.js';
import { TaskBook } from './book.js';
import { Resends } from './resend.js';
import { fileRefsOf, MESSAGE_TTL_MS, sendTask, wireBody, type Request } from './send.js';
import { sendFailure } from './limits.js';
import { takeAnswer, type AnswerParts } from './answers.js';
import { filesFromInline, forgetBlobs, uploadFiles, uploadedRef, type FileArg, type InlineFile } from './files.js';
import type { FileRef } from '../../protocol/file-ref.js';
import { Subject, filter } from 'rxjs';
import { MAX_PREVIEW_BYTES, PREVIEW_GAP_MS, readPreview, type Preview } from '../../protocol/preview.js';
import { coalescer, type Coalescer } from '../../util/coalesce.js';
import { toBody } from '../../protocol/body.js';
import { TASK_CANCEL } from '../../protocol/messages.js';

/** A change of a task the caller follows: its record, or a preview of the provider's progress (kept nowhere). */
export type TaskUpdate = { type: 'record'; record: TaskRecord } | { type: 'preview'; task: string; at: number; preview: Preview };
export type OnUpdate = (u: TaskUpdate) => void;

/** What a surface adds to a task it starts: who follows it, and the A2A contextId its client gave. */
export interface Follow {
  onUpdate?: OnUpdate;
  context?: string;
  /** Aborted when the one following has gone (a dropped stream): the wait ends, the task goes on. */
  signal?: AbortSignal;
}

/** How long `cancel` waits for the provider's answer by default. */
export const CANCEL_WAIT_MS = 10_000;

/** A task that cannot be canceled (it has ended, or there is no such task); `state` says where it stands. */
export class CancelError extends Error {
  override name = 'CancelError';
  constructor(
    message: string,
    readonly state: TaskState | null,
  ) {
    super(message);
  }
}

export type { TaskRecord, TaskState } from './records.js';
export {
  RESEND_FIRST_MS,
  RESEND_FACTOR,
  RESEND_MAX_MS,
  RESEND_SILENT_MS,
  RESEND_SILENT_WORKING_MS,
  resendDelay,
  UNANSWERED_DETAIL,
  SILENT_DETAIL,
} from './resend.js';

export interface CallerParts {
  me: string;
  /** The `tasks` records, the outbox in `payloads`, and the contact credentials held (the whole store: Contacts takes it). */
  store: Store;
  reader: Pick<Reader, 'kel'>;
  messenger: () => Promise<Pick<Messenger, 'send'>>;
  now: () => number;
  payer: Payer;
  /** Timers for resends (the node's clock; tests move it). */
  clock?: Pick<Clock, 'at'>;
  /** The hub's base URL: a call's files are uploaded there as sealed blobs (issue 20). */
  hub: string;
}

export class Caller {
  private readonly book: TaskBook;
  private readonly resends: Resends;
  /** One change of a task at a time. */
  private readonly turns = new KeyedSerial();
  /** What reading an answer uses: the credentials held, the provider's KEL, the payment part. */
  private readonly answering: AnswerParts;
  /** Resends sent and tasks given up by this process (tests read them). */
  readonly stats: { resent: number; gaveUp: number };
  /** Every record change and every preview, as they happen (in memory only). */
  private readonly updates = new Subject<TaskUpdate>();
  /**
   * Previews on their way to followers, per task: a provider's bound of PREVIEW_PER_SECOND is held here
   * too, so a provider that floods cannot flood the local clients (only the last of a burst goes).
   */
  private readonly previews = new Map<string, Coalescer<{ at: number; preview: Preview }>>();

  constructor(private readonly parts: CallerParts) {
    this.answering = { me: parts.me, reader: parts.reader, contacts: new Contacts(parts.store), payer: parts.payer, now: parts.now };
    this.book = new TaskBook(parts.store, parts.now, (record) => {
      // An ended task's preview still waiting goes before its final record (it was sent before it).
      if (isFinal(record.state)) this.endPreviews(record.task);
      this.updates.next({ type: 'record', record });
    });
    this.resends = new Resends(parts, {
      turn: (task, fn) => this.turns.run(task, fn),
      record: (task) => this.book.raw(task),
      giveUp: (task, rec, detail, at) => this.record(task, next(rec, { type: 'unanswered', at, detail })),
    });
    this.stats = this.resends.stats;
  }

  /** Sends a text task (SPEC §9.2); resolves like `call`. */
  send(to: string, text: string, waitMs: number, follow: Follow = {}): Promise<TaskRecord> {
    // `working` is an answer too: the task waits for the other side's operator (SPEC §9.2).
    return this.start(to, CHAT, { text }, waitMs, follow, (r) => r.state === 'working');
  }

  /** Sends a call; resolves with its record once final, or as it stands after `waitMs`. */
  async call(to: string, capability: string, argsText: string, files: FileArg[], waitMs: number, follow: Follow = {}): Promise<TaskRecord> {
    // Files are checked and uploaded before the task exists: a file refused here leaves no record.
    const refs = files.length ? await this.fileRefs(files) : [];
    const request: Request = { capability, args: argsText, ...(refs.length ? { files: refs } : {}) };
    // A quote the operator must decide on is an answer too: `anet pay` or `anet reject` goes on from there.
    return this.start(to, capability, request, waitMs, follow, awaitingOperator);
  }

  /** The references of a call's files: inline ones sealed and uploaded here, uploaded ones checked. */
  private async fileRefs(files: FileArg[]): Promise<FileRef[]> {
    const inline = files.filter((f): f is InlineFile => 'data_b64' in f);
    const uploaded = await uploadFiles(this.parts.hub, await filesFromInline(inline));
    return files.map((f) => ('data_b64' in f ? uploaded.shift()! : uploadedRef(f)));
  }

  /** A new task: its record and outbox entry are written while the `task.send` goes out; resends are armed. */
  private async start(
    to: string,
    capability: string,
    request: Request,
    waitMs: number,
    follow: Follow,
    enough?: (r: TaskRecord) => boolean,
  ): Promise<TaskRecord> {
    const task = randomHex(8);
    const body = wireBody(task, request);
    const now = this.parts.now();
    const record = newRecord(task, to, capability, now, follow.context ?? null);
    // Known in memory at once, written while the message goes out; the request is kept beside it until the
    // provider answers, so it can be sent again (and after a restart).
    const kept = await this.resends.keep(task, { to, request }).catch(async (err: Error) => {
      // Its files' keys could not be set aside (a full disk): nothing was sent, so its blobs go.
      await forgetBlobs(this.parts.hub, blobCids(request));
      throw err;
    });
    const written = this.book.write(task, record, [kept]);
    const unfollow = this.follow(task, follow.onUpdate);
    follow.onUpdate?.({ type: 'record', record });
    const settled = this.book.until(task, waitMs, undefined, enough, follow.signal).settled.finally(unfollow);
    this.resends.sent(task, to, now);
    try {
      const messenger = await this.parts.messenger();
      await Promise.all([written, sendTask(messenger, to, body)]);
    } catch (err) {
      const failure = sendFailure(err, body);
      // Never sent: its files' blobs go, and the record says so, rather than `submitted` for ever.
      await forgetBlobs(this.parts.hub, blobCids(request));
      await written.catch(() => {});
      const event: TaskEvent = { type: 'not-delivered', at: this.parts.now(), detail: failure.message.slice(0, 300) };
      await this.turns.run(task, () => this.record(task, next(record, event)));
      throw failure;
    }
    return settled;
  }

  /** Whether anyone follows a task now (a stream, a blocking call): tools and tests read it. */
  following(): boolean {
    return this.updates.observed;
  }

  /** Passes the updates of one task to `onUpdate` until the returned function is called. */
  private follow(task: string, onUpdate: OnUpdate | undefined): () => void {
    if (!onUpdate) return () => {};
    const sub = this.updates.pipe(filter((u) => (u.type === 'record' ? u.record.task : u.task) === task)).subscribe(onUpdate);
    return () => sub.unsubscribe();
  }

  /**
   * Follows a task: `onUpdate` gets its record as it stands, then each change and preview; resolves with
   * the record once it has ended, or as it stands after `waitMs`.
   */
  async watch(id: string, waitMs: number, onUpdate?: OnUpdate, signal?: AbortSignal): Promise<TaskRecord> {
    const unfollow = this.follow(id, onUpdate);
    try {
      const rec = await this.task(id);
      if (!rec) throw new Error(`no task ${id} (see \`anet tasks\`)`);
      onUpdate?.({ type: 'record', record: rec });
      if (isFinal(rec.state)) return rec;
      const wait = this.book.until(id, waitMs, undefined, undefined, signal);
      // It may have ended between the read and the wait: then no change is left to wake the wait.
      const now = await this.task(id);
      if (now && isFinal(now.state)) {
        wait.cancel();
        return now;
      }
      return await wait.settled;
    } finally {
      unfollow();
    }
  }

  /**
   * Cancels a task (issue 21). A quote is declined (`anet reject`); a task under way gets `task.cancel`:
   * its provider aborts the service request, releases a hold, and answers `canceled`. Resolves with the
   * record once final, or as it stands after `waitMs` (a provider that is away has not answered yet; a
   * result that crossed the cancel stands).
   */
  async cancel(id: string, waitMs = CANCEL_WAIT_MS): Promise<TaskRecord> {
    const rec = await this.task(id);
    if (!rec) throw new CancelError(`no task ${id} (see \`anet tasks\`)`, null);
    if (isFinal(rec.state))
      throw new CancelError(`task ${id} is ${rec.state}${rec.reason ? ` (${rec.reason})` : ''}: it has ended`, rec.state);
    if (rec.state === 'input-required') {
      try {
        return await this.reject(id);
      } catch (err) {
        // Paid meanwhile: it runs now, and is canceled as a running task.
        if (!(err instanceof PaymentError)) throw err;
      }
    }
    const wait = this.book.until(id, waitMs);
    try {
      const messenger = await this.parts.messenger();
      await messenger.send(rec.to, TASK_CANCEL, toBody({ task: id }), { ttlMs: MESSAGE_TTL_MS });
    } catch (err) {
      wait.cancel();
      throw err;
    }
    const after = await wait.settled;
    return isFinal(after.state) ? after : ((await this.task(id)) ?? after);
  }

  /** Writes a task's next record; once it has ended or been quoted, its resends stop (their outbox entry goes with it). */
  private async record(id: string, rec: TaskRecord, ops: WriteOp[] = []): Promise<void> {
    // A quoted task is recovered by its payment (PROTOCOL §7.3), not by resends.
    await this.book.put(id, rec, resendsOver(rec) ? this.resends.stop(id) : ops);
    await this.resends.dropLetGo(id);
  }

  async task(id: string): Promise<TaskRecord | undefined> {
    return this.book.shown(id);
  }

  async tasks(): Promise<TaskRecord[]> {
    return this.book.all();
  }

  /** `task.status` and `task.result` from the provider the task was sent to. */
  onReply(): MessageHandler {
    return async (m) => {
      const body = fromBody(m.body);
      const id = body?.task;
      if (!body || typeof id !== 'string') return;
      await this.turns.run(id, () => this.answered(id, m.from, body, m.at));
    };
  }

  private async answered(id: string, from: string, body: Record<string, unknown>, at: number): Promise<void> {
    const rec = await this.book.raw(id);
    // Only the provider we asked, and never after the task ended (a late `interrupted` changes nothing).
    if (!rec || rec.to !== from || isFinal(rec.state)) return;
    if (body.preview !== undefined && this.previewed(id, body, at) && rec.state === 'working') return;
    const after = await takeAnswer(this.answering, rec, body, at);
    await this.record(id, after, this.resends.heard(id));
    // The auto-pay rule may fetch the provider's extended card (up to 10 s): not on the bus.
    if (after.state === 'input-required' && after.payment && !after.payment.decided) {
      void this.turns.run(id, () => this.decide(id)).catch(() => {});
    }
  }

  /**
   * A `task.status` carrying a preview (PROTOCOL §6.10): passed on to whoever follows the task, written
   * nowhere. True when it was one (a task already `working` then needs no new record).
   */
  private previewed(task: string, body: Record<string, unknown>, at: number): boolean {
    if (body.state !== 'working' || typeof body.preview !== 'string') return false;
    // A provider's own bound, held to here too: a preview goes on to local clients as it is.
    if (Buffer.byteLength(body.preview) > MAX_PREVIEW_BYTES) return true;
    let preview: Preview | null = null;
    try {
      preview = readPreview(JSON.parse(body.preview));
    } catch {
      return false;
    }
    if (preview) this.previewsOf(task).push({ at, preview });
    return preview !== null;
  }

  private previewsOf(task: string): Coalescer<{ at: number; preview: Preview }> {
    let coalesced = this.previews.get(task);
    if (!coalesced) {
      coalesced = coalescer(PREVIEW_GAP_MS, this.parts.now, ({ at, preview }) => this.updates.next({ type: 'preview', task, at, preview }));
      this.previews.set(task, coalesced);
    }
    return coalesced;
  }

  private endPreviews(task: string): void {
    this.previews.get(task)?.end();
    this.previews.delete(task);
  }

  /** The auto-pay rule on a quote just taken: paid (journaled by the payment part), or left to the operator. */
  private async decide(id: string): Promise<void> {
    const rec = await this.book.raw(id);
    const quote = rec?.state === 'input-required' ? rec.payment : null;
    if (!rec || !quote || quote.decided) return;
    const payment = await this.parts.payer
      .decide({ ...rec, payment: quote })
      .catch((err): PaymentRecord => ({ ...quote, decided: true, auto: false, why: (err as Error).message }));
    await this.record(id, next(rec, { type: 'decided', at: this.parts.now(), payment }));
  }

  /** `anet pay`: pays the quote of a task waiting for the operator, then waits for its end. */
  async pay(id: string, waitMs: number, onUpdate?: OnUpdate, signal?: AbortSignal): Promise<TaskRecord> {
    // The waiter is registered before the payment leaves, so even an instant final answer is seen.
    const unfollow = this.follow(id, onUpdate);
    const wait = this.book.until(id, waitMs, undefined, undefined, signal);
    void wait.settled.finally(unfollow);
    await this.turns
      .run(id, async () => {
        const rec = await this.waiting(id);
        const payment = await this.parts.payer.pay(rec);
        await this.record(id, next(rec, { type: 'paid', at: this.parts.now(), payment }));
      })
      .catch((err) => {
        // Only this wait: another one on the task (an `anet call`) goes on.
        wait.cancel();
        unfollow();
        throw err;
      });
    const rec = await wait.settled;
    return isFinal(rec.state) ? rec : (await this.task(id))!;
  }

  /** `anet reject`: declines the quote of a task waiting for the operator; the task ends `canceled`. */
  async reject(id: string): Promise<TaskRecord> {
    return this.turns.run(id, async () => {
      const rec = await this.waiting(id);
      const payment = await this.parts.payer.reject(rec);
      const after = next(rec, { type: 'rejected', at: this.parts.now(), payment });
      await this.record(id, after);
      return after;
    });
  }

  private async waiting(id: string): Promise<TaskRecord> {
    const rec = await this.task(id);
    if (!rec) throw new PaymentError(`no task ${id} (see \`anet tasks\`)`);
    if (rec.state !== 'input-required')
      throw new PaymentError(`task ${id} is ${rec.state}${rec.reason ? ` (${rec.reason})` : ''}, not waiting for a payment`);
    return rec;
  }

  /** At start, once the relay is open: tasks not answered go out again on the resend schedule. Returns how many. */
  resume(): Promise<number> {
    return this.resends.resume();
  }

  /** At start: payments authorized before a crash whose task had not ended go out again (same bytes). */
  async resendPayments(): Promise<number> {
    const { sent, abandoned } = await this.parts.payer.resend();
    for (const task of abandoned) await this.change(task, () => ({ type: 'abandoned', at: this.parts.now() }));
    for (const { task, nonce, auto } of sent) await this.change(task, () => ({ type: 'payment-resent', nonce, auto }));
    return sent.length;
  }

  /** Applies `event` (made in the task's turn, so its time is when the record was read) to a task's record; one that does not apply writes nothing. */
  private change(task: string, event: () => TaskEvent): Promise<void> {
    return this.turns.run(task, async () => {
      const rec = await this.book.raw(task);
      if (!rec) return;
      const after = next(rec, event());
      if (after !== rec) await this.record(task, after);
    });
  }

  /** Stops every resend timer and preview (the node is closing). */
  close(): void {
    this.resends.close();
    for (const previews of this.previews.values()) previews.close();
    this.previews.clear();
    this.updates.complete();
  }
}

/** The blob CIDs a request names (references only: inline files of requests kept from before blobs name none). */
const blobCids = (r: Request): string[] => fileRefsOf(r).map((f) => f.cid);
