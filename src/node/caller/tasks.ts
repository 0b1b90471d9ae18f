// The caller's side of a capability call (SPEC §9): `task.send` to the provider, `task.status` and
// `task.result` back. Every task sent is kept in the `tasks` sublevel with its state, outcome and
// receipt (checked against the provider's KEL), so `anet tasks` / `anet task <id>` show it and a result
// that arrives after the CLI stopped waiting is still recorded. A task the provider has not answered is
// sent again, with the same task id, on a bounded backoff (the provider answers a repeat from its journal
// and never runs it twice), so a task lost on the way or an answer lost after it was journaled is asked
// for again; a provider that stays silent ends the task `failed`, `outcome_unknown` (see RESEND_*).
import { randomHex } from '../../util/random.js';
import type { Store, WriteOp } from '../../../store/db.js';
import type { Messenger, MessageHandler } from '../../relay/messenger.js';
import type { Reader } from '../../reader/reader.js';
import { fromBody, toBody } from '../../protocol/body.js';
import { MAX_MESSAGE_TTL_MS } from '../../protocol/envelope.js';
import { TASK_SEND } from '../../protocol/messages.js';
import { checkReceipt } from '../../protocol/receipt.js';
import { KeyedSerial } from '../../runtime/serial.js';
import { checkCredential, Contacts } from '../../contacts/credential.js';
import { explain } from '../../protocol/reasons.js';
import { CHAT } from '../../protocol/messages.js';
import type { CborValue } from '../../identity/cbor.js';
import { systemClock, type Clock } from '../../runtime/clock.js';
import { PaymentError, type Payer, type PaymentRecord } from './payment.js';
import { MessageTooLargeError } from '../../relay/client.js';
import { MAX_MESSAGE, fileBytesThatFit, mib } from '../../protocol/relay.js';

export type TaskState = 'submitted' | 'working' | 'input-required' | 'completed' | 'failed' | 'rejected' | 'canceled';

export interface TaskRecord {
  task: string;
  to: string;
  capability: string;
  state: TaskState;
  sentAt: number;
  updatedAt: number;
  reason: string | null;
  explanation: string | null;
  retryAfterMs: number | null;
  detail: string | null;
  message: string | null;
  result: unknown;
  /** CID of the provider's receipt when it verified; `invalid: …` when it did not. */
  receipt: string | null;
  /** A priced call's quote and payment (SPEC §10); null for free calls. */
  payment: PaymentRecord | null;
}

const FINAL: TaskState[] = ['completed', 'failed', 'rejected', 'canceled'];
/** A call whose quote the auto-pay rule left to the operator. */
const awaitingOperator = (r: TaskRecord) => r.state === 'input-required' && r.payment?.decided === true;

export interface CallerParts {
  me: string;
  store: Store;
  reader: Reader;
  messenger: () => Promise<Messenger>;
  now: () => number;
  payer: Payer;
  /** Timers for resends (the node's clock; tests move it). */
  clock?: Pick<Clock, 'at'>;
}

/**
 * Resends (PROTOCOL §6.4): a task not answered is sent again 5 s after it was sent, then after 15 s, 45 s,
 * 135 s, 405 s, and from then every 1215 s (about 20 min) while it has not ended. A provider silent for
 * RESEND_SILENT_MS since the task was sent (5 resends) ends it `failed`, `outcome_unknown`; one that said
 * it has the task (`working`) is polled for RESEND_SILENT_WORKING_MS of silence before that.
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
export const SILENT_DETAIL = 'the provider said it was working on the task, then nothing for 24 hours despite resends; its outcome is unknown';

/** What a task asks for, kept (payloads `outbox/<task>`) until the provider has answered, to send it again. */
interface Request {
  capability?: string;
  args?: string;
  files?: { name: string; data_b64: string }[];
  text?: string;
}

/** The outbox entry of a task that has not ended: the request until the provider answered, then null. */
interface Outbox {
  to: string;
  request: Request | null;
}

const OUTBOX = 'outbox/';
const MESSAGE_TTL_MS = MAX_MESSAGE_TTL_MS - 60_000;

/** A task's resend schedule, in memory (rebuilt from the outbox at start). */
interface Resend {
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

/** A task needs no more resends once it has ended or been quoted (its payment takes over). */
const resendsOver = (rec: TaskRecord): boolean => FINAL.includes(rec.state) || Boolean(rec.payment);

/** `task.send`'s body; with `resend` (the how-many-th) it is a repeat, and without a request a status poll. */
function wireBody(task: string, request: Request | null, resend?: number): Map<string, CborValue> {
  const r = request ?? {};
  const files = r.files?.length ? { files: r.files.map((f) => toBody({ name: f.name, data_b64: f.data_b64 })) } : {};
  return toBody({ task, capability: r.capability, args: r.args, ...files, text: r.text, resend });
}

export class Caller {
  private readonly waiters = new Map<string, ((r: TaskRecord) => void)[]>();
  /** Records of tasks not yet ended, ahead of (or equal to) their stored copies. */
  private readonly live = new Map<string, TaskRecord>();
  private readonly replies = new KeyedSerial();
  private readonly contacts: Contacts;
  private readonly resends = new Map<string, Resend>();
  private closed = false;
  /** Resends sent and tasks given up by this process (tests read them). */
  readonly stats = { resent: 0, gaveUp: 0 };

  constructor(private readonly parts: CallerParts) {
    this.contacts = new Contacts(parts.store);
  }

  /** Sends a text task (SPEC §9.2); resolves like `call`. */
  send(to: string, text: string, waitMs: number): Promise<TaskRecord> {
    // `working` is an answer too: the task waits for the other side's operator (SPEC §9.2).
    return this.start(to, CHAT, { text }, waitMs, undefined, (r) => r.state === 'working');
  }

  /** Sends a call; resolves with its record once final, or as it stands after `waitMs`. */
  call(to: string, capability: string, argsText: string, files: { name: string; data_b64: string }[], waitMs: number, onUpdate?: (r: TaskRecord) => void): Promise<TaskRecord> {
    // A quote the operator must decide on is an answer too: `anet pay` or `anet reject` goes on from there.
    return this.start(to, capability, { capability, args: argsText, ...(files.length ? { files: files.map((f) => ({ name: f.name, data_b64: f.data_b64 })) } : {}) }, waitMs, onUpdate, awaitingOperator);
  }

  private async start(to: string, capability: string, request: Request, waitMs: number, onUpdate?: (r: TaskRecord) => void, enough?: (r: TaskRecord) => boolean): Promise<TaskRecord> {
    const task = randomHex(8);
    const body = wireBody(task, request);
    const now = this.parts.now();
    const record: TaskRecord = {
      task, to, capability, state: 'submitted', sentAt: now, updatedAt: now,
      reason: null, explanation: null, retryAfterMs: null, detail: null, message: null, result: null, receipt: null, payment: null,
    };
    // Known in memory at once, written while the message goes out: grouped writes land in the order
    // they were queued, so a reply's later write always lands over this one.
    // The request is kept beside it until the provider answers, so it can be sent again (and after a restart).
    this.remember(task, record);
    const written = this.write(task, record, [this.outboxPut(task, { to, request })]);
    const { settled } = this.until(task, waitMs, onUpdate, enough);
    this.schedule(task, { to, sends: 1, lastSentAt: now, quietSince: now, heard: false, timer: null });
    try {
      const messenger = await this.parts.messenger();
      await Promise.all([written, messenger.send(to, TASK_SEND, body, { ttlMs: MESSAGE_TTL_MS })]);
    } catch (err) {
      // A message too large for the relay is said in the caller's terms (its files, arguments or text).
      const failure = err instanceof MessageTooLargeError ? new MessageTooLargeError(err.size, tooLargeLine(err.size, body)) : (err as Error);
      // Never sent: the record says so, rather than `submitted` for ever.
      await written.catch(() => {});
      const detail = failure.message.slice(0, 300);
      await this.replies.run(task, () => this.update(task, { ...record, state: 'failed', reason: 'not_delivered', explanation: explain('not_delivered'), detail, updatedAt: this.parts.now() }));
      throw failure;
    }
    return settled;
  }

  /** Resolves with the record once final (or `enough`), or as it stands after `waitMs`; `cancel` drops this wait. */
  private until(task: string, waitMs: number, onUpdate?: (r: TaskRecord) => void, enough: (r: TaskRecord) => boolean = () => false): { settled: Promise<TaskRecord>; cancel(): void } {
    let timer: NodeJS.Timeout | undefined;
    let wake!: (r: TaskRecord) => void;
    const settled = new Promise<TaskRecord>((resolve) => {
      timer = setTimeout(async () => {
        this.unwait(task, wake);
        // The node may have closed meanwhile (a stop during a long wait): then the record in memory.
        resolve((await this.task(task).catch(() => this.live.get(task)))!);
      }, waitMs);
      wake = (r: TaskRecord) => {
        onUpdate?.(r);
        if (!FINAL.includes(r.state) && !enough(r)) return;
        clearTimeout(timer);
        this.unwait(task, wake);
        resolve(r);
      };
      // Several may wait on one task (an `anet call` still waiting while `anet pay` runs).
      this.waiters.set(task, [...(this.waiters.get(task) ?? []), wake]);
    });
    return { settled, cancel: () => (clearTimeout(timer), this.unwait(task, wake)) };
  }

  private unwait(task: string, wake: (r: TaskRecord) => void): void {
    const left = (this.waiters.get(task) ?? []).filter((w) => w !== wake);
    if (left.length) this.waiters.set(task, left);
    else this.waiters.delete(task);
  }

  async task(id: string): Promise<TaskRecord | undefined> {
    const rec = await this.raw(id);
    return rec && this.asNow(rec);
  }

  /** The record as it stands (a quote past its end still says input-required: an answer may yet come). */
  private async raw(id: string): Promise<TaskRecord | undefined> {
    return this.live.get(id) ?? ((await this.parts.store.tasks.get(id)) as TaskRecord | undefined);
  }

  async tasks(): Promise<TaskRecord[]> {
    const all = (await this.parts.store.tasks.values().all()) as TaskRecord[];
    // A record in memory may be ahead of its stored copy (its write is on the way).
    return all.map((r) => this.live.get(r.task) ?? r).sort((a, b) => a.sentAt - b.sentAt).map((r) => this.asNow(r));
  }

  /** A quote nobody paid in time is shown as what it became: nothing more can happen to the task. */
  private asNow(rec: TaskRecord): TaskRecord {
    // Records written before payments existed have no `payment` field: shown as null.
    if (rec.state !== 'input-required' || !rec.payment || this.parts.now() < rec.payment.expiresAt) return { ...rec, payment: rec.payment ?? null };
    return { ...rec, state: 'failed', reason: 'quote_expired', explanation: explain('quote_expired'), detail: null };
  }

  /** At start: payments authorized before a crash whose task had not ended go out again (same bytes). */
  async resendPayments(): Promise<number> {
    const { sent, abandoned } = await this.parts.payer.resend();
    for (const task of abandoned) {
      await this.replies.run(task, async () => {
        const rec = await this.raw(task);
        if (!rec || FINAL.includes(rec.state)) return;
        const detail = 'the provider never answered after the payment; the hub has settled it by now: `anet balance` shows whether it was captured';
        await this.update(task, { ...rec, state: 'failed', reason: 'outcome_unknown', explanation: explain('outcome_unknown'), detail, updatedAt: this.parts.now() });
      });
    }
    for (const { task, nonce, auto } of sent) {
      // A record the crash left at the quote: it was paid, so it now waits for the call.
      await this.replies.run(task, async () => {
        const rec = await this.raw(task);
        if (rec?.state !== 'input-required' || !rec.payment) return;
        await this.update(task, { ...rec, state: 'working', reason: null, explanation: null, detail: null, payment: { ...rec.payment, status: 'payment-submitted', decided: true, auto, nonce } });
      });
    }
    return sent.length;
  }

  /** `anet pay`: pays the quote of a task waiting for the operator, then waits for its end. */
  async pay(id: string, waitMs: number, onUpdate?: (r: TaskRecord) => void): Promise<TaskRecord> {
    const wait = this.until(id, waitMs, onUpdate);
    // The waiter is registered before the payment leaves, so even an instant final answer is seen.
    await this.replies.run(id, async () => {
      const rec = await this.waiting(id);
      const payment = await this.parts.payer.pay(rec);
      await this.update(id, { ...rec, state: 'working', payment, reason: null, explanation: null, detail: null, updatedAt: this.parts.now() });
    }).catch((err) => {
      // Only this wait: another one on the task (an `anet call`) goes on.
      wait.cancel();
      throw err;
    });
    const settled = wait.settled;
    const rec = await settled;
    return FINAL.includes(rec.state) ? rec : (await this.task(id))!;
  }

  /** `anet reject`: declines the quote of a task waiting for the operator; the task ends `canceled`. */
  async reject(id: string): Promise<TaskRecord> {
    return this.replies.run(id, async () => {
      const rec = await this.waiting(id);
      const payment = await this.parts.payer.reject(rec);
      const next: TaskRecord = { ...rec, state: 'canceled', payment, reason: 'payment_rejected', explanation: explain('payment_rejected'), detail: null, updatedAt: this.parts.now() };
      await this.update(id, next);
      return next;
    });
  }

  private async waiting(id: string): Promise<TaskRecord> {
    const rec = await this.task(id);
    if (!rec) throw new PaymentError(`no task ${id} (see \`anet tasks\`)`);
    if (rec.state !== 'input-required') throw new PaymentError(`task ${id} is ${rec.state}${rec.reason ? ` (${rec.reason})` : ''}, not waiting for a payment`);
    return rec;
  }

  /** `task.status` and `task.result` from the provider the task was sent to. */
  onReply(): MessageHandler {
    return async (m) => {
      const body = fromBody(m.body);
      const id = body?.task;
      if (!body || typeof id !== 'string') return;
      // One reply of a task at a time: a status and a result arriving together must not cross.
      await this.replies.run(id, () => this.take(id, m.from, body, m.at));
    };
  }

  /** Bounded: the oldest unanswered tasks fall back to their stored copies. */
  private remember(id: string, rec: TaskRecord): void {
    if (!this.live.has(id) && this.live.size >= 10_000) this.live.delete(this.live.keys().next().value!);
    this.live.set(id, rec);
  }

  private async take(id: string, from: string, body: Record<string, unknown>, at: number): Promise<void> {
    const rec = await this.raw(id);
    // Only the provider we asked, and never after the task ended (a late `interrupted` changes nothing).
    if (!rec || rec.to !== from || FINAL.includes(rec.state)) return;
    const next = await this.apply(rec, body, at);
    await this.update(id, next, this.heard(id));
    // The auto-pay rule may fetch the provider's extended card (up to 10 s): not on the bus.
    if (next.state === 'input-required' && next.payment && !next.payment.decided) {
      void this.replies.run(id, () => this.decide(id)).catch(() => {});
    }
  }

  private async update(id: string, next: TaskRecord, ops: WriteOp[] = []): Promise<void> {
    this.remember(id, next);
    // Ended, or its quote arrived (a priced task is then recovered by its payment, PROTOCOL §7.3): no more resends.
    if (resendsOver(next)) ops = [...this.unschedule(id)];
    const written = this.write(id, next, ops);
    for (const wake of this.waiters.get(id) ?? []) wake(next);
    await written;
    if (FINAL.includes(next.state)) this.live.delete(id);
  }

  /** Task records of many calls share writes (Store.writeGrouped), and land in order. */
  private write(id: string, rec: TaskRecord, ops: WriteOp[] = []): Promise<void> {
    return this.parts.store.writeGrouped([{ type: 'put', sublevel: this.parts.store.tasks, key: id, value: rec }, ...ops]);
  }

  private outboxPut(task: string, entry: Outbox): WriteOp {
    return { type: 'put', sublevel: this.parts.store.payloads, key: OUTBOX + task, value: entry };
  }

  /** Arms a task's next resend: `resendDelay` after its last send. */
  private schedule(task: string, r: Resend): void {
    if (this.closed) return;
    r.timer?.cancel();
    this.resends.set(task, r);
    r.timer = (this.parts.clock ?? systemClock).at(r.lastSentAt + resendDelay(r.sends), () => void this.due(task, r).catch(() => {}));
  }

  /** No more resends of a task; its outbox entry goes (in the write of the record that ends them). */
  private unschedule(task: string): WriteOp[] {
    this.resends.get(task)?.timer?.cancel();
    this.resends.delete(task);
    return [{ type: 'del', sublevel: this.parts.store.payloads, key: OUTBOX + task }];
  }

  /** The provider answered: it holds the task, so the request need not be kept or sent again. */
  private heard(task: string): WriteOp[] {
    const r = this.resends.get(task);
    if (!r) return [];
    r.quietSince = this.parts.now();
    if (r.heard) return [];
    r.heard = true;
    return [this.outboxPut(task, { to: r.to, request: null })];
  }

  /** A resend is due: the task goes again, or, after too long a silence, ends `outcome_unknown`. */
  private async due(task: string, r: Resend): Promise<void> {
    await this.replies.run(task, async () => {
      if (this.closed || this.resends.get(task) !== r) return;
      r.timer = null;
      const rec = await this.raw(task);
      if (!rec || resendsOver(rec)) {
        await this.parts.store.writeGrouped(this.unschedule(task));
        return;
      }
      const now = this.parts.now();
      if (now - r.quietSince >= (r.heard ? RESEND_SILENT_WORKING_MS : RESEND_SILENT_MS)) {
        this.stats.gaveUp++;
        const detail = r.heard ? SILENT_DETAIL : UNANSWERED_DETAIL;
        await this.update(task, { ...rec, state: 'failed', reason: 'outcome_unknown', explanation: explain('outcome_unknown'), retryAfterMs: null, detail, updatedAt: now });
        return;
      }
      const stored = r.heard ? undefined : ((await this.parts.store.payloads.get(OUTBOX + task)) as Outbox | undefined);
      r.sends++;
      r.lastSentAt = now;
      this.schedule(task, r);
      this.stats.resent++;
      const body = wireBody(task, stored?.request ?? null, r.sends - 1);
      // Not awaited under the task's turn: a reply must not wait for a large upload.
      void this.parts.messenger().then((m) => m.send(r.to, TASK_SEND, body, { ttlMs: MESSAGE_TTL_MS })).catch(() => {});
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
    for await (const [key, value] of this.parts.store.payloads.iterator({ gte: OUTBOX, lt: `${OUTBOX}\uffff` })) {
      const task = String(key).slice(OUTBOX.length);
      if (this.closed) break;
      if (this.resends.has(task)) continue;
      const entry = value as Outbox;
      const rec = await this.raw(task);
      if (!rec || resendsOver(rec)) {
        await this.parts.store.writeGrouped(this.unschedule(task));
        continue;
      }
      const heard = entry.request === null;
      const quietSince = heard ? Math.max(rec.updatedAt, now - RESEND_SILENT_WORKING_MS + RESEND_SILENT_MS) : now;
      this.schedule(task, { to: entry.to, sends: 1, lastSentAt: now, quietSince, heard, timer: null });
      n++;
    }
    return n;
  }

  /** Stops every resend timer (the node is closing). */
  close(): void {
    this.closed = true;
    for (const r of this.resends.values()) r.timer?.cancel();
    this.resends.clear();
  }

  private async decide(id: string): Promise<void> {
    const rec = await this.raw(id);
    if (!rec || rec.state !== 'input-required' || !rec.payment || rec.payment.decided) return;
    const payment = await this.parts.payer.decide({ ...rec, payment: rec.payment }).catch((err): PaymentRecord => ({ ...rec.payment!, decided: true, auto: false, why: (err as Error).message }));
    const submitted = payment.status === 'payment-submitted';
    const reason = submitted ? null : payment.why?.includes('above the signed price') ? 'quote_above_price' : 'payment_required';
    await this.update(id, { ...rec, state: submitted ? 'working' : 'input-required', payment, reason, explanation: reason && explain(reason), detail: submitted ? null : payment.why, updatedAt: this.parts.now() });
  }

  private async apply(rec: TaskRecord, body: Record<string, unknown>, at: number): Promise<TaskRecord> {
    const state = (['working', 'input-required', 'completed', 'failed', 'rejected', 'canceled'] as TaskState[]).find((s) => s === body.state) ?? rec.state;
    const reason = typeof body.reason === 'string' ? body.reason : null;
    const next: TaskRecord = {
      ...rec,
      state,
      updatedAt: at,
      reason,
      explanation: reason ? explain(reason) : null,
      retryAfterMs: retryAfterOf(body.retry_after_ms),
      detail: typeof body.detail === 'string' ? body.detail : null,
      message: typeof body.message === 'string' ? body.message : null,
    };
    if (state === 'input-required') {
      // One quote per task: a second one, or one after we paid, changes nothing.
      if (rec.payment || rec.capability === CHAT) return rec;
      const payment = await this.parts.payer.quoted(rec, body, at);
      return { ...next, payment, reason: 'payment_required', explanation: explain('payment_required'), detail: payment.quoteError };
    }
    if (state === 'working' && rec.state === 'input-required') return rec;
    if (FINAL.includes(state) && rec.payment) next.payment = await this.parts.payer.settled(rec, body);
    if (body.credential instanceof Uint8Array) await this.keepCredential(rec.to, body.credential);
    else if (FINAL.includes(state)) await this.contacts.forget(rec.to);
    if (state === 'completed') {
      let result: unknown = null;
      try {
        result = JSON.parse(String(body.result));
      } catch {
        return { ...next, state: 'failed', reason: 'service_error', explanation: explain('service_error'), detail: 'the provider sent a result that is not JSON' };
      }
      // A text task's answer is the operator's words: no receipt (SPEC §9.4 is for capability calls).
      if (rec.capability === CHAT) return { ...next, result };
      const kel = await this.parts.reader.kel(rec.to);
      const paid = next.payment?.status === 'payment-completed' ? { amount: next.payment.quote!.amount, hubTx: next.payment.hubTx ?? '' } : {};
      const check = kel && body.receipt instanceof Uint8Array ? checkReceipt(body.receipt, { kel, task: rec.task, caller: this.parts.me, capability: rec.capability, result, ...paid }) : { ok: false as const, why: 'no receipt' };
      return { ...next, result, receipt: check.ok ? check.cid : `invalid: ${check.why}` };
    }
    return next;
  }

  private async keepCredential(from: string, bytes: Uint8Array): Promise<void> {
    const kel = await this.parts.reader.kel(from);
    if (kel && checkCredential(bytes, { iss: from, sub: this.parts.me, kel, now: this.parts.now() }).ok) await this.contacts.keep(from, bytes);
  }
}

/** Bytes a standard padded base64 text decodes to, without decoding it. */
const base64Bytes = (b64: string) => Math.floor((b64.length * 3) / 4) - (b64.endsWith('==') ? 2 : b64.endsWith('=') ? 1 : 0);

/**
 * The one line a caller reads when its sealed message is over the relay's limit: what is too large, by
 * how much, and what to do about it (the hub would only have said TOO_LARGE, after the whole upload).
 */
function tooLargeLine(size: number, body: Map<string, CborValue>): string {
  const limit = `the relay carries at most ${mib(MAX_MESSAGE)} per message`;
  const files = body.get('files');
  if (Array.isArray(files) && files.length > 0) {
    const raw = files.reduce<number>((sum, f) => sum + base64Bytes(String((f as Map<string, CborValue>).get('data_b64') ?? '')), 0);
    const fits = fileBytesThatFit(Buffer.byteLength(String(body.get('args') ?? '')));
    const what = files.length === 1 ? 'file' : `${files.length} files`;
    return `the call's ${what} (${mib(raw)}) ${files.length === 1 ? 'is' : 'are'} ${mib(size)} sealed (base64, padded to a power of two); ${limit}: send fewer or smaller files (about ${mib(fits)} in all fits)`;
  }
  if (body.has('capability')) return `the call's arguments are ${mib(size)} sealed; ${limit}: send smaller arguments`;
  return `the text is ${mib(size)} sealed; ${limit}: send a shorter text`;
}

/** Longest wait a provider may ask for; its service's Retry-After is capped alike (src/service/call.ts). */
const MAX_RETRY_AFTER_MS = 24 * 3_600_000;

/** The provider's `retry_after_ms` as a whole number of ms within a day: a peer's number is not trusted. */
function retryAfterOf(value: unknown): number | null {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) return null;
  return Math.min(Math.ceil(value), MAX_RETRY_AFTER_MS);
}
