// Text tasks (SPEC §4 rule 3, §9.2): a natural-language request for the operator's own agent. Accepted
// from peers on the allow or trust list, or from anyone under policy `open`; otherwise `not_accepting`.
// With `modules.agent.url` the node POSTs `{task_id, from, text}` to the local agent and returns its
// `{text}` (the §3.1 mapping); without it the task waits in the inbox for `anet reply`, and the caller
// sees `working`. Each text task is a call machine (`call/<caller>/<task>`, capability `chat`). Its answer
// is kept in `payloads` (as a call's result is), so a repeat of its task id gets it again.
import { sha256 } from '@noble/hashes/sha2.js';
import { standing } from '../../contacts/lists.js';
import type { BucketContext } from '../../../machines/bucket.js';
import { answer, callActor, receive, type Alongside, type CallParts } from './calls.js';
import { callService } from '../../service/call.js';
import { crashPoint } from '../../util/crash.js';
import { parseServiceUrl, type ServiceUrl } from '../../service/url.js';
import { CHAT } from '../../protocol/messages.js';

const MAX_TEXT_BYTES = 64 * 1024;
/** Text tasks one sender may send per minute, and how many may wait in the inbox at once. */
const TEXT_PER_SENDER_PER_MIN = 30;
const MAX_INBOX = 1000;

export interface InboxEntry {
  task: string;
  from: string;
  text: string;
  receivedAt: number;
}

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** Handles one text task; `task` was checked by the caller of this function. False for a task id seen before. */
export async function textTask(parts: CallParts, from: string, task: string, text: string): Promise<boolean> {
  const actor = callActor(from, task);
  const bytes = Buffer.from(text);
  const call = { caller: from, task, capability: CHAT };
  if (!(await receive(parts, actor, call, bytes))) return false;
  const who = await standing(parts.dataDir, parts.config, from);
  const listed = who === 'allowed' || who === 'trusted';
  const reply = (fields: Parameters<typeof answer>[3]) => answer(parts, from, task, fields, listed);
  const refusal = who === 'denied' || (!listed && parts.config.inbound.policy !== 'open') ? { reason: 'not_accepting' } : bytes.length > MAX_TEXT_BYTES ? { reason: 'args_too_large' } : await limits(parts, from);
  if (refusal) {
    await parts.host.send(actor, 'call', undefined, { type: 'REFUSED', ...refusal });
    await reply({ state: 'rejected', reason: refusal.reason, retry_after_ms: refusal.retryAfterMs, detail: refusal.detail });
    return true;
  }
  const agent = parts.config.modules.agent?.url;
  // In the batch of STARTED: the inbox entry the operator answers, or the running mark that ends the
  // task `interrupted` if the node stops while the agent works.
  const entry: InboxEntry = { task, from, text, receivedAt: parts.now() };
  await parts.host.send(actor, 'call', undefined, { type: 'STARTED' }, { alongside: [agent ? { sublevel: 'running', key: actor, value: call } : { sublevel: 'inbox', key: task, value: entry }] });
  if (!agent) {
    await reply({ state: 'working' });
    return true;
  }
  // The agent may take minutes: it runs apart from the bus, so other messages keep flowing.
  void askAgent(parts, actor, from, task, text, agent, listed).catch((err) => parts.log(`text task ${task}: ${(err as Error).message}`));
  return true;
}

/** A sender's per-minute window, and room in the inbox (a flood must not grow it without bound). */
async function limits(parts: CallParts, from: string): Promise<{ reason: string; retryAfterMs?: number; detail?: string } | null> {
  const window = (await parts.host.send(`quota/${CHAT}/${from}/min`, 'bucket', { limit: TEXT_PER_SENDER_PER_MIN, windowMs: 60_000 }, { type: 'ADMIT' })).context as BucketContext;
  if (!window.last?.admitted) return { reason: 'quota_caller_per_min', retryAfterMs: (window.last as { retryAfterMs: number }).retryAfterMs };
  if (!parts.config.modules.agent?.url) {
    let waiting = 0;
    for await (const _ of parts.store.inbox.keys({ limit: MAX_INBOX })) waiting++;
    if (waiting >= MAX_INBOX) return { reason: 'max_inflight', detail: 'the operator\'s inbox is full' };
  }
  return null;
}

async function askAgent(parts: CallParts, actor: string, from: string, task: string, text: string, agent: string, listed: boolean): Promise<void> {
  const reply = (fields: Parameters<typeof answer>[3]) => answer(parts, from, task, fields, listed);
  try {
    const body = Buffer.from(JSON.stringify({ task_id: task, from, text }));
    const outcome = await callService({ url: parseServiceUrl(agent) as ServiceUrl, timeoutMs: parts.config.modules.service.timeout_ms }, { caller: from, callId: task, capability: CHAT, body }, parts.now, parts.stopping);
    if (parts.stopping.aborted) return;
    const answerText = outcome.state === 'completed' ? outcome.result.text : undefined;
    const unmark = [{ sublevel: 'running' as const, key: actor }];
    if (outcome.state === 'completed' && typeof answerText === 'string') return finishText(parts, actor, from, task, answerText, listed, unmark);
    const reason = outcome.state === 'completed' ? 'service_error' : outcome.reason;
    await parts.host.send(actor, 'call', undefined, outcome.state === 'rejected' ? { type: 'SERVICE_REJECTED', message: outcome.message } : { type: 'FAILED', reason }, { alongside: unmark });
    await reply(outcome.state === 'rejected' ? { state: 'rejected', reason: 'service_rejected', message: outcome.message } : { state: 'failed', reason, detail: outcome.state === 'failed' ? outcome.detail : 'the agent\'s answer has no text' });
  } catch (err) {
    if (!parts.stopping.aborted) await parts.store.running.del(actor);
    throw err;
  }
}

/**
 * COMPLETED, with the records that leave in its batch (the running mark, or the inbox entry) and the
 * answer kept for a repeat of the task id.
 */
async function finishText(parts: CallParts, actor: string, from: string, task: string, text: string, listed: boolean | undefined, alongside: Alongside): Promise<void> {
  const result = JSON.stringify({ text });
  const kept = [...alongside, { sublevel: 'payloads' as const, key: actor, value: { result } }];
  await parts.host.send(actor, 'call', undefined, { type: 'COMPLETED', resultBytes: Buffer.byteLength(result), resultHash: hex(sha256(Buffer.from(result))), receipt: '' }, { alongside: kept });
  crashPoint('after-completed');
  await answer(parts, from, task, { state: 'completed', result }, listed);
}

/** `anet reply <task> TEXT`: answers a text task waiting in the inbox. */
export async function replyToInbox(parts: CallParts, task: string, text: string): Promise<InboxEntry> {
  const entry = (await parts.store.inbox.get(task)) as InboxEntry | undefined;
  if (!entry) throw new Error(`no task ${task} in the inbox (see \`anet inbox\`)`);
  await finishText(parts, callActor(entry.from, task), entry.from, task, text, undefined, [{ sublevel: 'inbox', key: task }]);
  return entry;
}

export async function inbox(parts: Pick<CallParts, 'store'>): Promise<InboxEntry[]> {
  return ((await parts.store.inbox.values().all()) as InboxEntry[]).sort((a, b) => a.receivedAt - b.receivedAt);
}
