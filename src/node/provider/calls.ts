// The provider's side of a capability call (SPEC §4, §3, §9): `task.send` → admission → the service →
// `task.result`, every step an event of the call's machine (`call/<caller>/<task>`), journaled before it
// takes effect. A task id seen before is never run again: it is answered with the task's current status,
// or its final answer rebuilt from the journal and `payloads` (a caller sends a task again until it hears
// back, so an answer lost on the way, or a task lost before it was journaled, is not lost for good). A
// call still running when the node stops is ended `interrupted` at the next start and the caller is told
// (§9.5). Completed calls carry a receipt.
import { randomHex } from '../../util/random.js';
import { sha256 } from '@noble/hashes/sha2.js';
import type { CallContext } from '../../../machines/call.js';
import type { Config } from '../../config/schema.js';
import type { SendOptions } from '../../runtime/host.js';
import type { MessageHandler } from '../../relay/messenger.js';
import { MAX_MESSAGE_TTL_MS } from '../../protocol/envelope.js';
import { fromBody, toBody } from '../../protocol/body.js';
import type { CborValue } from '../../identity/cbor.js';
import { precheck, takeSlots, admitWith, actors, type FileIn, type FileOut, type Refusal } from './admission.js';
import { standing } from '../../contacts/lists.js';
import { issueAndRecord } from '../../contacts/credential.js';
import { callService, checkTarget, type ServiceOutcome } from '../../service/call.js';
import { parseServiceUrl, type ServiceUrl } from '../../service/url.js';
import { offeredCapabilities, type OfferedCapability } from '../../config/check.js';
import { isPriced } from '../../card/build.js';
import { signReceipt, resultHash } from '../../protocol/receipt.js';
import { textTask } from './text.js';
import { CHAT } from '../../protocol/messages.js';
import { offerQuote, roomToQuote } from './payment.js';
import { X402_STATUS, X402_REQUIRED, QUOTE_SIGNATURE } from '../../protocol/messages.js';
import { paymentRequired, signQuote } from '../../protocol/quote.js';
import { crashPoint } from '../../util/crash.js';
import type { ActorHost } from '../../runtime/host.js';
import type { NodeParts } from '../parts.js';
import { TASK_RESULT, TASK_STATUS, taskMessage } from '../../protocol/messages.js';

const FINAL = ['completed', 'failed', 'rejected', 'canceled'];
/** A call still running after this long sends the caller `task.status working`. */
const WORKING_AFTER_MS = 500;
/** A result waits in the hub's queue for an offline caller as long as the relay allows. */
const RESULT_TTL_MS = MAX_MESSAGE_TTL_MS - 60_000;

export type CallParts = NodeParts;

export interface Running {
  caller: string;
  task: string;
  capability: string;
}

/** The call machine of one task: capability calls and text tasks alike. */
export const callActor = (caller: string, task: string) => `call/${caller}/${task}`;
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');


export function callDesk(parts: CallParts): MessageHandler {
  return async (m) => {
    const msg = taskMessage(m);
    if (!msg) return;
    // Taken from the relay, nothing journaled yet: a crash here leaves no trace of the task on this node.
    crashPoint('after-deliver');
    const { body, task } = msg;
    const actor = callActor(m.from, task);
    // A second delivery while the first is still being admitted waits for it, then is a repeat: it never
    // asks for quota or a slot (and never makes another caller's call refused for one).
    const arriving = arrivingOf(parts.host);
    const earlier = arriving.get(actor);
    if (earlier) {
      await earlier;
      return answerRepeat(parts, m.from, task);
    }
    let done!: () => void;
    arriving.set(actor, new Promise<void>((resolve) => (done = resolve)));
    let repeat: boolean;
    try {
      repeat = await deliver(parts, m.from, task, actor, body);
    } finally {
      arriving.delete(actor);
      done();
    }
    if (repeat) await answerRepeat(parts, m.from, task);
  };
}

/** Per host, the task ids whose first delivery is being admitted (RECEIVED not yet journaled). */
const arrivingTasks = new WeakMap<ActorHost, Map<string, Promise<void>>>();

function arrivingOf(host: ActorHost): Map<string, Promise<void>> {
  let map = arrivingTasks.get(host);
  if (!map) arrivingTasks.set(host, (map = new Map()));
  return map;
}

/**
 * Handles one delivery of a task; true when its task id was known (a repeat, to be answered). A caller's
 * resend carries `resend`: its task is looked up first, so a known one takes no quota or slot. A resend
 * without the request (a status poll, sent once the provider has answered) for an unknown task has
 * nothing to run and is dropped.
 */
async function deliver(parts: CallParts, caller: string, task: string, actor: string, body: Record<string, CborValue>): Promise<boolean> {
  if (body.resend !== undefined) {
    if (await parts.host.state(actor)) return true;
    if (typeof body.args !== 'string' && typeof body.text !== 'string') return false;
  }
  if (body.capability === undefined && typeof body.text === 'string') return !(await textTask(parts, caller, task, body.text));
  const argsText = typeof body.args === 'string' ? body.args : '';
  const call: Running = { caller, task, capability: typeof body.capability === 'string' ? body.capability : '' };
  const reply: Reply = (fields, listed, after) => answer(parts, caller, task, fields, listed, after);
  const started = await admitAndStart(parts, actor, call, argsText, body.files, reply);
  if (started === 'resend') return true;
  if (typeof started === 'string') return false;
  // The service runs apart from the bus, so a long call never holds up card requests or other calls;
  // how many run at once is the admission's in-flight limit.
  void started.done.catch((err) => parts.stopping.aborted || parts.log(`call ${task} (${call.capability}): ${(err as Error).message}`));
  return false;
}

const FINAL_STATES = ['completed', 'failed', 'rejected'];

/**
 * The answer to a task id seen before (PROTOCOL §6.4): nothing runs again. A task still under way gets
 * `working` (a priced one still waiting for payment its quote again); an ended one its final answer,
 * rebuilt from the journal: a completed call's result and receipt from `payloads`, a refusal or failure
 * from the call's context. A `discard` call's result is gone: `failed`, `interrupted`. A paid call's
 * final answer goes to its `task.pay` (§7.3), and a canceled one has none.
 */
export async function answerRepeat(parts: CallParts, caller: string, task: string): Promise<void> {
  const actor = callActor(caller, task);
  const state = await parts.host.state(actor);
  if (!state) return;
  const ctx = state.context as CallContext;
  const value = String(state.value);
  if (value === 'new' || value === 'canceled') return;
  if (value === 'quoted') {
    if (ctx.quoteExpiresAt === null || parts.now() >= ctx.quoteExpiresAt) return;
    const network = `hub:${await parts.hubAid()}`;
    const required = paymentRequired({ network, amount: ctx.amount!, payTo: parts.identity.aid, skillId: ctx.capability, taskId: task, quoteId: ctx.quoteId! });
    return answer(parts, caller, task, { state: 'input-required', reason: 'payment_required', [X402_STATUS]: 'payment-required', [X402_REQUIRED]: JSON.stringify(required), [QUOTE_SIGNATURE]: signQuote(parts.identity, required) });
  }
  if (!FINAL_STATES.includes(value)) return answer(parts, caller, task, { state: 'working' });
  if (ctx.payNonce !== null) return;
  await answer(parts, caller, task, await storedAnswer(parts, actor, ctx, value));
}

/** What a kept call leaves in `payloads`: its result, and the receipt it was answered with. */
interface Kept {
  result?: string | null;
  receipt?: Uint8Array;
  receiptKsn?: number;
}

/** An ended unpaid call's final answer, as it was sent (a wait to retry after counts from when it was given). */
async function storedAnswer(parts: CallParts, actor: string, ctx: CallContext, value: string): Promise<Record<string, CborValue | undefined>> {
  const since = parts.now() - (ctx.endedAt ?? parts.now());
  const retry = ctx.retryAfterMs === null ? undefined : Math.max(0, ctx.retryAfterMs - since);
  if (value === 'rejected') return { state: 'rejected', reason: ctx.reason ?? undefined, message: ctx.message ?? undefined, detail: ctx.detail ?? undefined, retry_after_ms: retry };
  if (value === 'failed') return { state: 'failed', reason: ctx.reason ?? undefined, detail: ctx.detail ?? undefined, retry_after_ms: retry };
  const kept = (await parts.store.payloads.get(actor)) as Kept | undefined;
  if (typeof kept?.result !== 'string') return { state: 'failed', reason: 'interrupted', detail: 'the call completed, but its answer did not reach you and the provider does not keep its result (discard)' };
  if (ctx.capability === CHAT && ctx.receipt === null) return { state: 'completed', result: kept.result };
  // The receipt the call was answered with; signed again (same task and result hash) after a key rotation.
  const receipt = kept.receipt && kept.receiptKsn === parts.identity.kel.ksn
    ? new Uint8Array(kept.receipt)
    : signReceipt(parts.identity, { task: ctx.task, capability: ctx.capability, caller: ctx.caller, result_hash: Buffer.from(ctx.resultHash!, 'hex'), at: parts.now() }).bytes;
  return { state: 'completed', result: kept.result, receipt };
}

/**
 * RECEIVED and the quota checks go to the journal in one batch; then the in-flight slot; then the
 * service runs. A priced call is quoted instead (its slot is taken once it is paid, SPEC §10). Returns
 * the running call (boxed: an awaited promise would be joined), or why not.
 */
async function admitAndStart(parts: CallParts, actor: string, call: Running, argsText: string, rawFiles: CborValue | undefined, reply: Reply): Promise<{ done: Promise<void> } | 'refused' | 'resend' | 'quoted'> {
  let args: unknown;
  try {
    args = JSON.parse(argsText);
  } catch {
    args = undefined;
  }
  const files = Array.isArray(rawFiles) ? rawFiles.map(fileIn) : undefined;
  const callIn = { id: `${call.caller}/${call.task}`, from: call.caller, capability: call.capability, args, argsBytes: Buffer.byteLength(argsText), ...(files ? { files } : {}) };
  const checked = await precheck(parts, callIn);
  const priced = !('admitted' in checked) && isPriced(checked.capability);
  // The socket check (SPEC §3.2) runs while the call is journaled and admitted; the service waits for it.
  const service = 'admitted' in checked || priced ? null : target(parts.config, checked.capability);
  const socketCheck = service ? checkTarget(service) : null;
  // Marked running in the same batch as RECEIVED: a crash from here on ends it `interrupted` at the next
  // start, with its slots freed. The mark goes in the batch of the event that ends the call. A free call
  // asks for its windows and its in-flight slot in that batch too.
  const received = () => receive(parts, actor, call, Buffer.from(argsText), [{ sublevel: 'running', key: actor, value: call }]);
  const [first, decision] = 'admitted' in checked || priced
    ? await Promise.all([received(), 'admitted' in checked ? Promise.resolve(checked) : takeSlots(parts, checked, callIn, { inflight: false })])
    : await admitWith(parts, checked, callIn, received);
  if (!first) {
    if (decision.admitted) await decision.release(true);
    return 'resend';
  }
  if (!decision.admitted) {
    await refuse(parts, actor, decision, (f) => reply(f, decision.listed), call.capability);
    return 'refused';
  }
  const listedReply: Reply = (f, _listed, after) => reply(f, decision.listed, after);
  if (priced) {
    const full = roomToQuote(parts, decision.capability, call.caller);
    if (full) {
      await decision.release(true);
      await refuse(parts, actor, { admitted: false, reason: full, detail: 'too many quotes wait for payment' }, listedReply, call.capability);
      return 'refused';
    }
    await offerQuote(parts, { actor, call, argsText, capability: decision.capability, files: decision.files, listed: decision.listed, undoQuota: () => decision.release(true) });
    return 'quoted';
  }
  // No STARTED event: an admitted call goes from `submitted` to its end, and the running mark ends it
  // `interrupted` if the node stops first.
  const done = (async () => {
    try {
      const outcome = await serve(parts, call, argsText, decision.files, service!, socketCheck!, listedReply);
      // Stopping: nothing is answered or released now; the next start ends the call `interrupted`.
      if (parts.stopping.aborted) return;
      // `discard` (SPEC §9.3): arguments, files and result lived only in memory and go with this scope.
      const payload = decision.capability.inbound.discard ? null : payloadOf(argsText, decision.files, outcome);
      await finish(parts, actor, call, outcome, listedReply, payload, () => decision.release());
    } catch (err) {
      if (!parts.stopping.aborted) await decision.release();
      throw err;
    }
  })();
  return { done };
}

/** The service call, with a `working` status to the caller when it takes a while. */
export async function serve(parts: CallParts, call: Running, argsText: string, files: FileOut[], service: ServiceTarget, socketCheck: ReturnType<typeof checkTarget>, reply: Reply): Promise<ServiceOutcome> {
  // A quick call needs no progress message; a slow one tells the caller it is running.
  const status = setTimeout(() => void reply({ state: 'working' }).catch(() => {}), WORKING_AFTER_MS);
  return callService(service, {
    caller: call.caller, callId: call.task, capability: call.capability, body: serviceBody(argsText, files),
  }, parts.now, parts.stopping, socketCheck).finally(() => clearTimeout(status));
}

/**
 * Journals a task's RECEIVED (sizes and a hash of its payload only); false for a resend: only the
 * first RECEIVED of a task id takes (each delivery's random nonce tells which one did).
 */
export async function receive(parts: Pick<CallParts, 'host'>, actor: string, call: Running, payload: Uint8Array, alongside: Alongside = []): Promise<boolean> {
  const nonce = randomHex(8);
  const event = { type: 'RECEIVED', nonce, task: call.task, caller: call.caller, capability: call.capability, argsBytes: payload.length, argsHash: hex(sha256(payload)) };
  const snapshot = await parts.host.send(actor, 'call', undefined, event, { alongside });
  return (snapshot.context as CallContext).nonce === nonce;
}

export type Alongside = NonNullable<SendOptions['alongside']>;

/** What a call without `discard` leaves for the operator: its arguments, its files' digests, its result. */
export function payloadOf(argsText: string, files: FileOut[], outcome: ServiceOutcome): unknown {
  const fileDigests = files.map((f) => {
    const bytes = Buffer.from(f.data_b64, 'base64');
    return { name: f.name, mime: f.mime, bytes: bytes.length, sha256: hex(sha256(bytes)) };
  });
  return { args: argsText, files: fileDigests, result: outcome.state === 'completed' ? outcome.text : null };
}

/** Written with the event that ends a call: its running mark goes, its payload (if kept) comes. */
export function ending(actor: string, payload: unknown): Alongside {
  return [{ sublevel: 'running', key: actor }, ...(payload === null ? [] : [{ sublevel: 'payloads' as const, key: actor, value: payload }])];
}

/** Answers the caller; with `after`, the answer is sealed at once but sent only once `after` resolves. */
export type Reply = (fields: Record<string, CborValue | undefined>, listed?: boolean, after?: Promise<unknown>) => Promise<void>;

function fileIn(v: unknown): FileIn {
  const f = fromBody(v as CborValue) ?? {};
  return { name: String(f.name ?? ''), data_b64: typeof f.data_b64 === 'string' ? f.data_b64 : '', ...(typeof f.mime === 'string' ? { mime: f.mime } : {}) };
}

/** The argument object itself, or `{args, files}` with the node's own media types (SPEC §3). */
function serviceBody(argsText: string, files: FileOut[]): Uint8Array {
  if (files.length === 0) return Buffer.from(argsText);
  return Buffer.from(`{"args":${argsText},"files":${JSON.stringify(files)}}`);
}

export type ServiceTarget = { url: ServiceUrl; timeoutMs: number; tokenFile?: string };

export function target(config: Config, cap: OfferedCapability): ServiceTarget {
  const module = config.modules.service;
  const tokenFile = cap.service.token_file ?? module.token_file;
  return { url: parseServiceUrl(cap.service.url) as ServiceUrl, timeoutMs: cap.service.timeout_ms ?? module.timeout_ms, ...(tokenFile ? { tokenFile } : {}) };
}

/** A `discard` capability's journal holds no words that may carry its payload (file names, echoes). */
export const discards = (config: Config, capability: string) => offeredCapabilities(config).some((c) => c.id === capability && c.inbound.discard);

async function refuse(parts: CallParts, actor: string, r: Refusal, reply: Reply, capability: string): Promise<void> {
  const detail = r.detail && !discards(parts.config, capability) ? { detail: r.detail } : {};
  await parts.host.send(actor, 'call', undefined, { type: 'REFUSED', reason: r.reason, ...(r.retryAfterMs !== undefined ? { retryAfterMs: r.retryAfterMs } : {}), ...detail }, { alongside: ending(actor, null) });
  await reply({ state: 'rejected', reason: r.reason, retry_after_ms: r.retryAfterMs, detail: r.detail });
}

/**
 * Journals the outcome, gives the in-flight slot back (the call no longer runs; both are sent at once, so
 * they share a journal batch when they can), then answers.
 */
async function finish(parts: CallParts, actor: string, call: Running, outcome: ServiceOutcome, reply: Reply, payload: unknown, release: () => Promise<void>): Promise<void> {
  // Hashed once, for the receipt and the journal (canonical JSON of a result up to 1 MiB).
  const hash = outcome.state === 'completed' ? resultHash(outcome.result) : undefined;
  const receipt = hash ? signReceipt(parts.identity, { task: call.task, capability: call.capability, caller: call.caller, result_hash: hash, at: parts.now() }) : null;
  // A kept call keeps the receipt it is answered with, so a repeat of its task id gets the same one.
  const kept = payload !== null && receipt ? { ...(payload as object), receipt: receipt.bytes, receiptKsn: parts.identity.kel.ksn } : payload;
  const alongside = ending(actor, kept);
  const ended = parts.host.send(actor, 'call', undefined, outcomeEvent(parts, call, outcome, receipt?.cid, hash), { alongside }).then((s) => {
    if (outcome.state === 'completed') crashPoint('after-completed');
    return s;
  });
  const released = release();
  // Awaited below; a failed journal write is reported through `ended` first.
  released.catch(() => {});
  const fields = outcome.state === 'completed'
    ? { state: 'completed', result: outcome.text, receipt: receipt!.bytes }
    : outcome.state === 'rejected'
      ? { state: 'rejected', reason: 'service_rejected', message: outcome.message }
      : { state: 'failed', reason: outcome.reason, detail: outcome.detail, retry_after_ms: outcome.retryAfterMs };
  // The answer is sealed while the outcome is written and leaves once it is durable.
  await reply(fields, undefined, ended);
  await released;
}

/** The journal's record of a service outcome: sizes and hashes, the reason, never the payload. */
export function outcomeEvent(parts: CallParts, call: Running, outcome: ServiceOutcome, receipt = '', hash?: Uint8Array): { type: string; [k: string]: unknown } {
  if (outcome.state === 'completed') return { type: 'COMPLETED', resultBytes: Buffer.byteLength(outcome.text), resultHash: hex(hash ?? resultHash(outcome.result)), receipt };
  if (outcome.state === 'rejected') return { type: 'SERVICE_REJECTED', message: discards(parts.config, call.capability) ? '' : outcome.message };
  if (outcome.operatorDetail) parts.log(`call ${call.task} (${call.capability}): ${outcome.reason}: ${outcome.operatorDetail}`);
  return { type: 'FAILED', reason: outcome.reason, ...(outcome.detail ? { detail: outcome.detail } : {}), ...(outcome.retryAfterMs !== undefined ? { retryAfterMs: outcome.retryAfterMs } : {}) };
}

/** A reply to the caller, with a fresh contact credential when the caller is on our lists (SPEC §7). */
export async function answer(parts: CallParts, caller: string, task: string, fields: Record<string, CborValue | undefined>, known?: boolean, after?: Promise<unknown>): Promise<void> {
  if (after) {
    // Until `after` settles, a failure here must not leave it unhandled.
    after.catch(() => {});
    // One turn of the event loop first: the journal write `after` waits for is issued then (the host
    // gathers a batch for one turn), so the seal below runs during its fsync rather than before it.
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  // The standing the admission just read, when there was one; else read now.
  const who = known === undefined ? await standing(parts.dataDir, parts.config, caller) : null;
  const listed = known ?? (who === 'allowed' || who === 'trusted');
  const final = FINAL.includes(String(fields.state));
  const credential = listed && final ? await issueAndRecord(parts.store, parts.identity, caller, parts.now()) : undefined;
  const sealed = await parts.messenger.seal(caller, final ? TASK_RESULT : TASK_STATUS, toBody({ task, ...fields, credential }), { ttlMs: RESULT_TTL_MS });
  await after;
  await parts.messenger.deliver(sealed);
}

/**
 * At start, before any message is taken: nothing runs after a restart, so every in-flight count starts
 * empty (a slot can never leak across a stop), and every call that was running ends `failed`,
 * `interrupted` — its outcome is unknown, so it is not run again. A quoted call's arguments are gone, so
 * it ends the same way (nothing was charged). A paid call still owing the hub its settlement keeps its
 * mark until settled (an interrupted one releases its hold). Returns the callers to tell and the calls
 * to settle.
 */
export async function interruptRunning(parts: Omit<CallParts, 'messenger'>): Promise<{ told: Running[]; settle: string[] }> {
  for (const cap of offeredCapabilities(parts.config)) {
    await parts.host.send(actors(cap.id, '').inflight, 'inflight', { max: cap.inbound.max_inflight, perCaller: cap.inbound.per_caller_inflight }, { type: 'CLEAR' });
  }
  const told: Running[] = [];
  const settle: string[] = [];
  for await (const [actor, value] of parts.store.running.iterator()) {
    const state = await parts.host.state(actor);
    const paid = state ? (state.context as CallContext).payNonce !== null : false;
    if (state?.value === 'settling' || (paid && (state?.value === 'paying' || state?.value === 'working'))) {
      if (state.value !== 'settling') await parts.host.send(actor, 'call', undefined, { type: 'INTERRUPTED' });
      settle.push(actor);
      continue;
    }
    await parts.store.running.del(actor);
    // Ended but not yet unmarked when the node stopped: its caller already has the answer.
    if (state && state.value !== 'submitted' && state.value !== 'working' && state.value !== 'quoted') continue;
    await parts.host.send(actor, 'call', undefined, { type: 'INTERRUPTED' });
    told.push(value as Running);
  }
  return { told, settle };
}

/** Tells the callers of interrupted calls, once the relay is open. */
export async function tellInterrupted(parts: CallParts, calls: Running[]): Promise<void> {
  for (const r of calls) {
    await answer(parts, r.caller, r.task, { state: 'failed', reason: 'interrupted', detail: 'the provider stopped while the call ran; its outcome is unknown' }).catch(() => {});
  }
}
