// JSON-RPC 2.0 at `/a2a/v1/agents/<aid>/jsonrpc` (SPEC §12) with the A2A v1.0 method names and error
// codes. Only the v1.0 names are served: @a2a-js/sdk 1.3.0 sends them to an interface declaring
// protocolVersion "1.0" (its v0.3 names — message/send, tasks/get, ... — come only from its legacy
// transport, which also speaks the v0.3 shapes, so answering them with v1.0 shapes would mislead).
import { isLosslessNumber, type LosslessNumber } from 'lossless-json';
import type { Parsed } from './parse.js';
import { PaymentError, type Operate } from '../node/operations.js';
import { explain } from '../protocol/reasons.js';
import { readMessage, toTask, MessageError, type Request } from './tasks.js';

/** How long SendMessage waits for a final state before answering with the task as it stands; clients poll GetTask after. */
export const SEND_WAIT_MS = 5_000;

export const CODES = {
  parseError: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internal: -32603,
  taskNotFound: -32001,
  taskNotCancelable: -32002,
  unsupported: -32004,
  invalidAgentResponse: -32006,
  extendedCardNotConfigured: -32007,
} as const;

export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

/** Numbers stay as written (lossless), so the answer echoes the id exactly. */
type Id = string | LosslessNumber | null;
type Params = Record<string, unknown>;
type Method = (operate: Operate, aid: string, params: Params) => Promise<unknown>;

const METHODS: Record<string, Method> = {
  GetExtendedAgentCard: getExtendedAgentCard,
  SendMessage: sendMessage,
  GetTask: getTask,
  CancelTask: cancelTask,
};

/**
 * One request body, parsed (parse.ts: losslessly, so a capability's arguments reach the service with every
 * digit the client wrote), in; one response object out (never throws).
 */
export async function answerRpc(operate: Operate, aid: string, parsed: Parsed): Promise<Record<string, unknown>> {
  if (!parsed.ok) return failure(null, new RpcError(CODES.parseError, 'Parse error: the body is not JSON'));
  const r = parsed.value as Record<string, unknown> | null;
  // Every A2A call expects an answer, so a request without an id (a notification) is refused as well.
  const id = idOf(r?.id);
  if (typeof r !== 'object' || r === null || Array.isArray(r) || r.jsonrpc !== '2.0' || typeof r.method !== 'string' || id === undefined) {
    return failure(
      id ?? null,
      new RpcError(CODES.invalidRequest, 'Invalid Request: one JSON-RPC 2.0 request object with an id and a method'),
    );
  }
  const method = METHODS[r.method];
  if (!method) return failure(id, new RpcError(CODES.methodNotFound, `Method not found: ${r.method}`));
  const params = r.params ?? {};
  if (typeof params !== 'object' || params === null || Array.isArray(params))
    return failure(id, new RpcError(CODES.invalidParams, 'Invalid params: params must be an object'));
  try {
    return { jsonrpc: '2.0', id, result: await method(operate, aid, params as Params) };
  } catch (err) {
    return failure(id, err instanceof RpcError ? err : new RpcError(CODES.internal, (err as Error).message));
  }
}

/** A JSON-RPC id: a string, a number, or null; undefined when absent or of another type. */
function idOf(id: unknown): Id | undefined {
  return typeof id === 'string' || id === null || isLosslessNumber(id) ? id : undefined;
}

function failure(id: Id, err: RpcError): Record<string, unknown> {
  return { jsonrpc: '2.0', id, error: { code: err.code, message: err.message, ...(err.data !== undefined ? { data: err.data } : {}) } };
}

/** An error carrying a SPEC §13 reason in `data`, with its sentence as the message too. */
const reasoned = (code: number, reason: string) => new RpcError(code, explain(reason), { reason, explanation: explain(reason) });

/** SPEC §6.3, the right-hand column: the same outcome `anet card` shows, as A2A answers it. */
async function getExtendedAgentCard(operate: Operate, aid: string): Promise<unknown> {
  const view = await operate('card', { aid });
  // A public card that does not verify (or whose KEL fails) is an invalid answer from that agent.
  if (!view.verified) throw reasoned(CODES.invalidAgentResponse, view.reason ?? 'card_signature_invalid');
  // Only the newest extended card is an answer: an older one held in its place (SPEC §6.3 "unavailable")
  // is an error that still carries that signed card and when the provider may be asked again.
  if (view.stale) {
    const data = {
      reason: 'card_stale',
      explanation: view.explanation,
      stale: true,
      card: view.card,
      lastAttemptAt: view.lastAttemptAt,
      nextAttemptAt: view.nextAttemptAt,
    };
    throw new RpcError(CODES.internal, explain('card_stale'), data);
  }
  if (view.extended === 'ok') return view.card; // the signed card as the provider sent it
  switch (view.reason) {
    case 'not_applicable':
    case 'not_configured':
      throw reasoned(CODES.extendedCardNotConfigured, view.reason);
    case 'card_signature_invalid':
      throw reasoned(CODES.invalidAgentResponse, view.reason);
    default:
      throw reasoned(CODES.internal, view.reason ?? 'card_unavailable');
  }
}

async function sendMessage(operate: Operate, aid: string, params: Params): Promise<unknown> {
  let request: Request;
  try {
    request = readMessage(params.message);
  } catch (err) {
    if (!(err instanceof MessageError)) throw err;
    throw new RpcError(err.unsupported ? CODES.unsupported : CODES.invalidParams, `Invalid params: ${err.message}`);
  }
  const configuration = params.configuration as { returnImmediately?: unknown } | undefined;
  const waitMs = configuration?.returnImmediately === true ? 0 : SEND_WAIT_MS;
  if (request.kind === 'payment') return { task: toTask(await answerQuote(operate, aid, request.task, request.decision, waitMs)) };
  const record =
    request.kind === 'call'
      ? await operate('call', { aid, capability: request.capability, args: request.argsText, files: request.files, waitMs })
      : await operate('send', { aid, text: request.text, waitMs });
  return { task: toTask(record) };
}

/** a2a-x402: the client's answer to a quote. The node signs the payment itself, under `anet pay` rules. */
async function answerQuote(operate: Operate, aid: string, id: string, decision: 'payment-submitted' | 'payment-rejected', waitMs: number) {
  const record = await taskOf(operate, aid, { id });
  try {
    return decision === 'payment-submitted'
      ? await operate('pay', { task: record.task, waitMs })
      : await operate('reject', { task: record.task });
  } catch (err) {
    if (err instanceof PaymentError) throw new RpcError(CODES.invalidParams, `Invalid params: ${err.message}`, { state: record.state });
    throw err;
  }
}

/** The task by id, when it was sent to this agent (another agent's endpoint does not see it). */
async function taskOf(operate: Operate, aid: string, params: Params) {
  if (typeof params.id !== 'string' || params.id === '') throw new RpcError(CODES.invalidParams, 'Invalid params: id must be the task id');
  const record = await operate('task', { id: params.id });
  if (!record || record.to !== aid) throw new RpcError(CODES.taskNotFound, `Task not found: ${params.id}`);
  return record;
}

async function getTask(operate: Operate, aid: string, params: Params): Promise<unknown> {
  return toTask(await taskOf(operate, aid, params));
}

/**
 * Only a task waiting for payment can be canceled: its quote is rejected, as `anet reject` does (SPEC
 * §10), and it ends `canceled` on both sides. Any other sent task cannot be called back: once the
 * provider has it, it runs or waits for that side's operator.
 */
async function cancelTask(operate: Operate, aid: string, params: Params): Promise<unknown> {
  let record = await taskOf(operate, aid, params);
  if (record.state === 'input-required') {
    try {
      return toTask(await operate('reject', { task: record.task }));
    } catch (err) {
      // Paid (or expired) in the meantime: say what it is now.
      if (!(err instanceof PaymentError)) throw err;
      record = await taskOf(operate, aid, params);
    }
  }
  throw new RpcError(CODES.taskNotCancelable, `Task cannot be canceled: ${record.task} is ${record.state}`, { state: record.state });
}
