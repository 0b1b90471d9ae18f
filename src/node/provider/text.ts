// Text tasks (SPEC §4 rule 3, §9.2): a natural-language request for the operator's own agent. Accepted
// from peers on the allow or trust list, or from anyone under policy `open`; otherwise `not_accepting`.
// With `modules.agent.url` the node POSTs `{task_id, from, text}` to the local agent and returns its
// `{text}` (the §3.1 mapping); without it the task waits in the inbox for `anet reply`, and the caller
// sees `working`. Each text task is a call record (capability `chat`): RECEIVED, then REFUSED or STARTED,
// then COMPLETED (its answer kept in `payloads`, so a repeat of its task id gets it again) or FAILED.
import { sha256 } from '@noble/hashes/sha2.js';
import { standing } from '../../contacts/lists.js';
import { callService } from '../../service/call.js';
import { crashPoint } from '../../util/crash.js';
import { parseServiceUrl, type ServiceUrl } from '../../service/url.js';
import { CHAT } from '../../protocol/messages.js';
import type { ActorHost } from '../../runtime/host.js';
import { bucket, quotaIds } from '../../actors/bucket.js';
import { call, type Alongside, type Call } from '../../actors/call.js';
import { receive, type Running } from './record.js';
import { answer, replyTo, TEXT_REPLY_TTL_MS, type ReplyParts } from './reply.js';
import type { Cancels } from './cancels.js';
import type { Preview } from '../../protocol/preview.js';
import { previewsOf } from './service.js';
import type { Log } from '../../util/log.js';

const MAX_TEXT_BYTES = 64 * 1024;
/** Text tasks one sender may send per minute, and how many may wait in the inbox at once. */
const TEXT_PER_SENDER_PER_MIN = 30;
const MAX_INBOX = 1000;

/** What text tasks use of the node. */
export interface TextParts extends ReplyParts {
  host: ActorHost;
  log: Log;
  stopping: AbortSignal;
  /** The running tasks a caller may cancel (a task with the local agent is one). */
  cancels: Cancels;
}

export interface InboxEntry {
  task: string;
  from: string;
  text: string;
  receivedAt: number;
}

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** Handles one text task; `task` was checked by the caller of this function. False for a task id seen before. */
export async function textTask(parts: TextParts, record: Call, text: string): Promise<boolean> {
  const { caller: from, task } = record;
  const bytes = Buffer.from(text);
  const running: Running = { caller: from, task, capability: CHAT };
  if (!(await receive(record, running, bytes))) return false;
  const who = await standing(parts.dataDir, parts.config, from);
  const listed = who === 'allowed' || who === 'trusted';
  const reply = replyTo(parts, from, task, listed, TEXT_REPLY_TTL_MS);
  const refusal =
    who === 'denied' || (!listed && parts.config.inbound.policy !== 'open')
      ? { reason: 'not_accepting' }
      : bytes.length > MAX_TEXT_BYTES
        ? { reason: 'args_too_large' }
        : await limits(parts, from);
  if (refusal) {
    await record.refused(refusal);
    await reply({ state: 'rejected', reason: refusal.reason, retry_after_ms: refusal.retryAfterMs, detail: refusal.detail });
    return true;
  }
  const agent = parts.config.modules.agent?.url;
  // In the batch of STARTED: the inbox entry the operator answers, or the running mark that ends the
  // task `interrupted` if the node stops while the agent works.
  const entry: InboxEntry = { task, from, text, receivedAt: parts.now() };
  await record.started([agent ? { sublevel: 'running', key: record.id, value: running } : { sublevel: 'inbox', key: task, value: entry }]);
  if (!agent) {
    await reply({ state: 'working' });
    return true;
  }
  // The agent may take minutes: it runs apart from the bus, so other messages keep flowing.
  void askAgent(parts, record, text, agent, listed).catch((err) => parts.log(`text task ${task}: ${(err as Error).message}`, 'error'));
  return true;
}

/** A sender's per-minute window, and room in the inbox (a flood must not grow it without bound). */
async function limits(parts: TextParts, from: string): Promise<{ reason: string; retryAfterMs?: number; detail?: string } | null> {
  const window = await bucket(parts.host, quotaIds(CHAT, from).callerMin).admit({ limit: TEXT_PER_SENDER_PER_MIN, windowMs: 60_000 });
  if (!window.admitted) return { reason: 'quota_caller_per_min', retryAfterMs: window.retryAfterMs };
  if (!parts.config.modules.agent?.url) {
    let waiting = 0;
    for await (const _ of parts.store.inbox.keys({ limit: MAX_INBOX })) waiting++;
    if (waiting >= MAX_INBOX) return { reason: 'max_inflight', detail: "the operator's inbox is full" };
  }
  return null;
}

/** The agent's answer: COMPLETED, or FAILED / SERVICE_REJECTED, each with the running mark going. */
async function askAgent(parts: TextParts, record: Call, text: string, agent: string, listed: boolean): Promise<void> {
  const { caller: from, task } = record;
  const reply = replyTo(parts, from, task, listed, TEXT_REPLY_TTL_MS);
  const run = parts.cancels.open(record.id, parts.stopping);
  // The agent may stream its answer too: its progress events are previews (PROTOCOL §6.10).
  const preview = previewsOf(parts, { caller: from, task, capability: CHAT });
  try {
    const body = Buffer.from(JSON.stringify({ task_id: task, from, text }));
    const outcome = await callService(
      { url: parseServiceUrl(agent) as ServiceUrl, timeoutMs: parts.config.modules.service.timeout_ms },
      { caller: from, callId: task, capability: CHAT, body, ...(preview ? { onProgress: (p: Preview) => preview.push(p) } : {}) },
      parts.now,
      run.signal,
    );
    preview?.close();
    if (parts.stopping.aborted) return;
    const answerText = outcome.state === 'completed' ? outcome.result.text : undefined;
    const unmark: Alongside = [{ sublevel: 'running', key: record.id }];
    if (outcome.state === 'completed' && typeof answerText === 'string') return finishText(parts, record, answerText, listed, unmark);
    if (run.canceled()) {
      const ended = record.canceled({ reason: 'canceled' }, unmark);
      return await reply({ state: 'canceled', reason: 'canceled' }, ended);
    }
    const reason = outcome.state === 'completed' ? 'service_error' : outcome.reason;
    await record.outcome(
      outcome.state === 'rejected' ? { type: 'SERVICE_REJECTED', message: outcome.message } : { type: 'FAILED', reason },
      unmark,
    );
    await reply(
      outcome.state === 'rejected'
        ? { state: 'rejected', reason: 'service_rejected', message: outcome.message }
        : { state: 'failed', reason, detail: outcome.state === 'failed' ? outcome.detail : "the agent's answer has no text" },
    );
  } catch (err) {
    if (!parts.stopping.aborted) await parts.store.running.del(record.id);
    throw err;
  } finally {
    preview?.close();
    run.close();
  }
}

/**
 * COMPLETED, with the records that leave in its batch (the running mark, or the inbox entry) and the
 * answer kept for a repeat of the task id.
 */
async function finishText(parts: ReplyParts, record: Call, text: string, listed: boolean | undefined, alongside: Alongside): Promise<void> {
  const result = JSON.stringify({ text });
  const kept = [...alongside, { sublevel: 'payloads' as const, key: record.id, value: { result } }];
  await record.outcome(
    { type: 'COMPLETED', resultBytes: Buffer.byteLength(result), resultHash: hex(sha256(Buffer.from(result))), receipt: '' },
    kept,
  );
  crashPoint('after-completed');
  await answer(parts, record.caller, record.task, { state: 'completed', result }, listed, undefined, TEXT_REPLY_TTL_MS);
}

/** `anet reply <task> TEXT`: answers a text task waiting in the inbox. */
export async function replyToInbox(parts: ReplyParts & { host: ActorHost }, task: string, text: string): Promise<InboxEntry> {
  const entry = (await parts.store.inbox.get(task)) as InboxEntry | undefined;
  if (!entry) throw new Error(`no task ${task} in the inbox (see \`anet inbox\`)`);
  await finishText(parts, call(parts.host, entry.from, task), text, undefined, [{ sublevel: 'inbox', key: task }]);
  return entry;
}

export async function inbox(parts: Pick<ReplyParts, 'store'>): Promise<InboxEntry[]> {
  return ((await parts.store.inbox.values().all()) as InboxEntry[]).sort((a, b) => a.receivedAt - b.receivedAt);
}
