// A2A v1.0 messages in, tasks out (JSON names of a2a.proto, as the JSON-RPC binding carries them).
//
// A message becomes one anet task (SPEC §1, §9):
// - a capability call: exactly one data part `{"capability": "<id>", "args": {...}}` (args optional,
//   default `{}`), plus any number of file parts with their bytes (`raw`, base64) and a `filename`;
// - a text task: text parts only, joined with newlines.
// Nothing else is guessed: a message mixing text with a data part, a file by URL, or a data part with
// other keys is refused with the reason, so a client never sends something we silently read otherwise.
import { stringify as stringifyLossless } from 'lossless-json';
import type { TaskRecord } from '../node/operations.js';
import { CHAT } from '../protocol/messages.js';
import { X402_STATUS, X402_REQUIRED, X402_RECEIPTS } from '../protocol/messages.js';

/** What a message asks for; `context` is the client's contextId, kept on the task (A2A §3.4.1). */
export type Request = (
  | { kind: 'call'; capability: string; argsText: string; files: { name: string; data_b64: string }[] }
  | { kind: 'text'; text: string }
  | { kind: 'continue'; task: string; decision: Decision | null }
) & { context?: string };

/** a2a-x402: a client's answer to a quote. */
export type Decision = 'payment-submitted' | 'payment-rejected';

/** A message we cannot take: the JSON-RPC answer is invalid params (or unsupported, for continuations). */
export class MessageError extends Error {
  constructor(
    message: string,
    readonly unsupported = false,
  ) {
    super(message);
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export function readMessage(message: unknown): Request {
  if (!isObject(message)) throw new MessageError('params.message must be an A2A Message object');
  if (message.contextId !== undefined && typeof message.contextId !== 'string')
    throw new MessageError('params.message.contextId must be a string');
  const context = message.contextId ? { context: message.contextId } : {};
  // Each message starts a new anet task. The one continuation is a2a-x402's answer to a quote: metadata
  // `x402.payment.status` `payment-submitted` (this node signs and pays, as `anet pay`) or
  // `payment-rejected` (as `anet reject`). The node is the wallet, so the client sends no payload. Any
  // other continuation is refused by the caller once it knows the task exists (rpc.ts).
  if (typeof message.taskId === 'string' && message.taskId !== '') {
    const decision = isObject(message.metadata) ? message.metadata[X402_STATUS] : undefined;
    const known = decision === 'payment-submitted' || decision === 'payment-rejected' ? decision : null;
    return { kind: 'continue', task: message.taskId, decision: known, ...context };
  }
  return { ...readNew(message), ...context };
}

/** A message starting a task: a capability call or a text task. */
function readNew(message: Record<string, unknown>): Request {
  const parts = message.parts;
  if (!Array.isArray(parts) || parts.length === 0) throw new MessageError('params.message.parts must be a non-empty array');
  const texts: string[] = [];
  const data: unknown[] = [];
  const files: { name: string; data_b64: string }[] = [];
  for (const [i, part] of parts.entries()) {
    if (!isObject(part)) throw new MessageError(`part ${i} is not an object`);
    if (typeof part.text === 'string') texts.push(part.text);
    else if ('data' in part) data.push(part.data);
    else if (typeof part.raw === 'string' && BASE64.test(part.raw))
      files.push({ name: typeof part.filename === 'string' && part.filename ? part.filename : `file-${i}`, data_b64: part.raw });
    else if ('url' in part) throw new MessageError(`part ${i}: files by URL are not fetched; send the bytes (raw, base64)`);
    else throw new MessageError(`part ${i} is not a text, data or raw (base64) file part`);
  }
  if (data.length === 0) {
    if (files.length > 0) throw new MessageError('files go with a capability call: add a data part {"capability": ..., "args": ...}');
    const text = texts.join('\n');
    if (text.trim() === '') throw new MessageError('a text task needs some text');
    return { kind: 'text', text };
  }
  if (data.length > 1) throw new MessageError('a capability call has exactly one data part {"capability": ..., "args": ...}');
  if (texts.length > 0) throw new MessageError('a capability call carries its arguments in its data part: send no text part beside it');
  return { kind: 'call', ...readCall(data[0]), files };
}

function readCall(data: unknown): { capability: string; argsText: string } {
  if (!isObject(data)) throw new MessageError('the data part must be an object {"capability": ..., "args": ...}');
  const extra = Object.keys(data).filter((k) => k !== 'capability' && k !== 'args');
  if (extra.length > 0)
    throw new MessageError(`the data part has only "capability" and "args", not ${extra.map((k) => `"${k}"`).join(', ')}`);
  if (typeof data.capability !== 'string' || data.capability === '')
    throw new MessageError('data.capability must be the capability id (a string)');
  const args = data.args ?? {};
  if (!isObject(args)) throw new MessageError('data.args must be a JSON object');
  // The request was parsed losslessly: numbers keep every digit on their way to the service.
  return { capability: data.capability, argsText: stringifyLossless(args)! };
}

/** SPEC §9.1 states as A2A v1.0 TaskState names. */
export const STATES: Readonly<Record<string, string>> = {
  submitted: 'TASK_STATE_SUBMITTED',
  working: 'TASK_STATE_WORKING',
  'input-required': 'TASK_STATE_INPUT_REQUIRED',
  completed: 'TASK_STATE_COMPLETED',
  failed: 'TASK_STATE_FAILED',
  rejected: 'TASK_STATE_REJECTED',
  canceled: 'TASK_STATE_CANCELED',
};

/**
 * A task's contextId: the client's (kept on the record), else the task's own id, since a task sent
 * without one is a conversation of its own; either way a later GetTask gives the same answer.
 */
export const contextOf = (r: TaskRecord): string => r.context ?? r.task;

/** The A2A Task for a task record. */
export function toTask(r: TaskRecord): Record<string, unknown> {
  const result = resultArtifact(r);
  return {
    id: r.task,
    contextId: contextOf(r),
    status: toStatus(r),
    ...(result ? { artifacts: [result] } : {}),
    metadata: { 'anet.capability': r.capability, ...(r.receipt !== null ? { 'anet.receipt': r.receipt } : {}) },
  };
}

/** The A2A TaskStatus of a record: its state, when it changed, and why it stands there. */
export function toStatus(r: TaskRecord): Record<string, unknown> {
  const status: Record<string, unknown> = {
    state: STATES[r.state] ?? 'TASK_STATE_UNSPECIFIED',
    timestamp: new Date(r.updatedAt).toISOString(),
  };
  const message = statusMessage(r);
  if (message) status.message = message;
  return status;
}

/** A completed task's one artifact, its result; null before. */
export function resultArtifact(r: TaskRecord): Record<string, unknown> | null {
  return r.state === 'completed' ? { artifactId: 'result', name: 'result', parts: [resultPart(r)] } : null;
}

/** A text task's answer is words; a capability call's result is the service's JSON. */
function resultPart(r: TaskRecord): Record<string, unknown> {
  const text = (r.result as { text?: unknown } | null)?.text;
  return r.capability === CHAT && typeof text === 'string' ? { text } : { data: r.result };
}

/** Why a task stands where it does (SPEC §9.1, §13): the provider's words or the reason's sentence. */
function statusMessage(r: TaskRecord): Record<string, unknown> | null {
  if (r.reason === null && r.message === null && !r.payment) return null;
  const metadata: Record<string, unknown> = { ...x402Metadata(r) };
  if (r.reason !== null) metadata['anet.reason'] = r.reason;
  if (r.retryAfterMs !== null) metadata['anet.retry_after_ms'] = r.retryAfterMs;
  if (r.detail !== null) metadata['anet.detail'] = r.detail;
  if (r.explanation !== null) metadata.explanation = r.explanation;
  return {
    messageId: `${r.task}-${r.updatedAt}`,
    taskId: r.task,
    contextId: contextOf(r),
    role: 'ROLE_AGENT',
    parts: [{ text: r.message ?? r.explanation ?? r.reason ?? r.payment?.status }],
    metadata,
  };
}

/** a2a-x402 metadata of a priced call: the status, the quote while it waits, the receipts once settled. */
function x402Metadata(r: TaskRecord): Record<string, unknown> {
  const p = r.payment;
  if (!p) return {};
  const out: Record<string, unknown> = { [X402_STATUS]: p.status };
  if (p.status === 'payment-required' && p.quote) out[X402_REQUIRED] = JSON.parse(p.required);
  if (p.receipts) out[X402_RECEIPTS] = p.receipts;
  return out;
}
