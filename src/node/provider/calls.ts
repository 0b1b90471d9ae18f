// The provider's desk (SPEC §4, §9, §10): the one entry of the provider role. It routes the peer
// messages of an inbound call to the steps that handle them — `task.send` to a text task, a free call or
// a priced call's quote (a task id seen before gets its answer again, repeat.ts), `task.pay` to the paid
// call, `task.cancel` to the quote it declines or the running call it stops — and owns the state those steps share in memory: the
// admission gates (gate.ts), the quotes waiting for payment (quotes.ts) and the task ids being admitted.
// Read top to bottom, the pipeline of one call is:
//   calls.ts → checks.ts → free-call.ts (slots.ts, gate.ts, record.ts, service.ts, reply.ts)
//                        → paid-call.ts (slots.ts, quotes.ts, record.ts, service.ts, settle.ts, reply.ts)
//            → text.ts (record.ts, reply.ts)      → repeat.ts (reply.ts)
// The node builds one Provider over its parts; each step declares the narrow parts it uses.
import type { CborValue } from '../../identity/cbor.js';
import type { MessageHandler } from '../../relay/messenger.js';
import { fromBody } from '../../protocol/body.js';
import { taskMessage } from '../../protocol/messages.js';
import { isPriced } from '../../card/build.js';
import { crashPoint } from '../../util/crash.js';
import { call, type Call } from '../../actors/call.js';
import { precheck, type CallIn, type FileIn } from './checks.js';
import { Gates } from './gate.js';
import { WaitingQuotes } from './quotes.js';
import { Cancels } from './cancels.js';
import { receive, refuse, runningMark, type Running } from './record.js';
import { replyTo } from './reply.js';
import { dropBlobs } from './files.js';
import { isFileRefBody, parseFileRef } from '../../protocol/file-ref.js';
import { answerRepeat, type RepeatParts } from './repeat.js';
import { freeCall, type FreeCallParts } from './free-call.js';
import { cancelQuote, payCall, quoteCall, type PaidCallParts } from './paid-call.js';
import { resumeSettlements } from './settle.js';
import { textTask, type TextParts } from './text.js';
import { interruptRunning, tellInterrupted, type RestartParts } from './restart.js';

/** What the provider uses of its node: the union of what its steps declare, less what it owns. */
export type ProviderParts = Omit<FreeCallParts & PaidCallParts & TextParts & RepeatParts & RestartParts, 'gates' | 'quotes' | 'cancels'>;

type Parts = FreeCallParts & PaidCallParts & TextParts & RepeatParts & RestartParts;

export class Provider {
  /** Each capability's admission gate. */
  readonly gates = new Gates();
  /** Priced calls waiting for their payment: their arguments live only here. */
  readonly quotes = new WaitingQuotes();
  /** The running calls, which their callers may cancel. */
  readonly cancels = new Cancels();
  /** The task ids whose first delivery is being admitted (RECEIVED not yet journaled). */
  private readonly arriving = new Map<string, Promise<void>>();
  private readonly parts: Parts;

  constructor(parts: ProviderParts) {
    this.parts = { ...parts, gates: this.gates, quotes: this.quotes, cancels: this.cancels };
  }

  /** `task.send`: a capability call or a text task; a task id seen before is answered, never run again. */
  readonly onSend: MessageHandler = async (m) => {
    const msg = taskMessage(m);
    if (!msg) return;
    // Taken from the relay, nothing journaled yet: a crash here leaves no trace of the task on this node.
    crashPoint('after-deliver');
    const record = call(this.parts.host, m.from, msg.task);
    // A second delivery while the first is still being admitted waits for it, then is a repeat: it never
    // asks for quota or a slot (and never makes another caller's call refused for one).
    const earlier = this.arriving.get(record.id);
    if (earlier) {
      await earlier;
      return answerRepeat(this.parts, record);
    }
    let done!: () => void;
    this.arriving.set(record.id, new Promise<void>((resolve) => (done = resolve)));
    let repeat: boolean;
    try {
      repeat = await this.deliver(record, msg.body);
    } finally {
      this.arriving.delete(record.id);
      done();
    }
    if (repeat) await answerRepeat(this.parts, record);
  };

  /** `task.pay`: the caller's payment for a quoted call. */
  readonly onPay: MessageHandler = async (m) => {
    const msg = taskMessage(m);
    if (!msg) return;
    await payCall(this.parts, call(this.parts.host, m.from, msg.task), msg.body);
  };

  /**
   * `task.cancel`: a quote waiting for payment is declined (whatever the body says); a running call is
   * aborted (cancels.ts) and ends `canceled`. A call that has ended, or is not ours to stop, stays as it is:
   * the caller already has (or will get) its final answer.
   */
  readonly onCancel: MessageHandler = async (m) => {
    const msg = taskMessage(m);
    if (!msg) return;
    const record = call(this.parts.host, m.from, msg.task);
    if (await cancelQuote(this.parts, record)) return;
    this.cancels.cancel(record.id);
  };

  /** At start, before any message is taken: ends the calls a stop interrupted (restart.ts). */
  interruptRunning(): Promise<{ told: Running[]; settle: Running[]; ended: Running[] }> {
    return interruptRunning(this.parts);
  }

  /** Once the relay is open: tells the callers of interrupted calls (and deletes blobs of calls that had ended). */
  tellInterrupted(calls: Running[], ended: Running[] = []): Promise<void> {
    return tellInterrupted(this.parts, calls, ended);
  }

  /** Once the relay is open: settles the paid calls a stop left owing the hub, and answers them. */
  resumeSettlements(calls: Running[]): Promise<void> {
    dropBlobs(
      this.parts.client,
      calls.flatMap((r) => r.blobs ?? []),
      this.parts.log,
    );
    return resumeSettlements(this.parts, calls);
  }

  /**
   * Handles one delivery of a task; true when its task id was known (a repeat, to be answered). A caller's
   * resend carries `resend`: its task is looked up first, so a known one takes no quota or slot. A resend
   * without the request (a status poll, sent once the provider has answered) for an unknown task has
   * nothing to run and is dropped.
   */
  private async deliver(record: Call, body: Record<string, CborValue>): Promise<boolean> {
    if (body.resend !== undefined) {
      if (await record.state()) return true;
      if (typeof body.args !== 'string' && typeof body.text !== 'string') return false;
    }
    if (body.capability === undefined && typeof body.text === 'string') return !(await textTask(this.parts, record, body.text));
    const argsText = typeof body.args === 'string' ? body.args : '';
    const blobs = blobsOf(body.files);
    const running: Running = {
      caller: record.caller,
      task: record.task,
      capability: typeof body.capability === 'string' ? body.capability : '',
      ...(blobs.length ? { blobs } : {}),
    };
    const started = await this.capabilityCall(record, running, argsText, body.files);
    if (started === 'resend') return true;
    // A refused call's files will never be read; a quoted one's wait for its payment (paid-call.ts).
    if (started === 'refused') dropBlobs(this.parts.client, blobs, this.parts.log);
    if (typeof started === 'string') return false;
    void started.done.finally(() => dropBlobs(this.parts.client, blobs, this.parts.log)).catch(() => {});
    // The service runs apart from the bus, so a long call never holds up card requests or other calls;
    // how many run at once is the admission's in-flight limit.
    void started.done.catch(
      (err) =>
        this.parts.stopping.aborted || this.parts.log(`call ${record.task} (${running.capability}): ${(err as Error).message}`, 'error'),
    );
    return false;
  }

  /** The checks that read no quota (checks.ts), then the free call's or the priced call's own steps. */
  private async capabilityCall(record: Call, running: Running, argsText: string, rawFiles: CborValue | undefined) {
    const callIn = callInOf(running, argsText, rawFiles);
    const checked = await precheck(this.parts, callIn);
    if ('admitted' in checked) {
      // Refused before any quota was asked: RECEIVED (with the running mark), then REFUSED.
      if (!(await receive(record, running, Buffer.from(argsText), runningMark(record, running)))) return 'resend';
      await refuse(this.parts, record, checked, replyTo(this.parts, running.caller, running.task, checked.listed), running.capability);
      return 'refused';
    }
    if (isPriced(checked.capability)) return quoteCall(this.parts, record, running, callIn, argsText, checked);
    return freeCall(this.parts, record, running, callIn, argsText, checked);
  }
}

/** The blob CIDs a `task.send` names (valid references only: the others fail the checks and name nothing). */
function blobsOf(files: CborValue | undefined): string[] {
  if (!Array.isArray(files)) return [];
  return files.flatMap((v) => {
    const ref = isFileRefBody(v) ? parseFileRef(v) : null;
    return ref && 'cid' in ref ? [ref.cid] : [];
  });
}

/** The call as the admission checks read it: its arguments parsed, its files as sent. */
function callInOf(call: Running, argsText: string, rawFiles: CborValue | undefined): CallIn {
  let args: unknown;
  try {
    args = JSON.parse(argsText);
  } catch {
    args = undefined;
  }
  const files = Array.isArray(rawFiles) ? rawFiles.map(fileIn) : undefined;
  return {
    id: `${call.caller}/${call.task}`,
    from: call.caller,
    capability: call.capability,
    args,
    argsBytes: Buffer.byteLength(argsText),
    ...(files ? { files } : {}),
  };
}

function fileIn(v: unknown): FileIn {
  if (isFileRefBody(v)) return { ref: parseFileRef(v) };
  const f = fromBody(v as CborValue) ?? {};
  return {
    name: String(f.name ?? ''),
    data_b64: typeof f.data_b64 === 'string' ? f.data_b64 : '',
    ...(typeof f.mime === 'string' ? { mime: f.mime } : {}),
  };
}
