// JSON-RPC 2.0 at `/a2a/v1/agents/<aid>/jsonrpc` (SPEC §12) with the A2A v1.0 method names and error
// codes (A2A §9). Only A2A-Version 1.0 is served (version.ts). The v0.3 method names (message/send,
// tasks/get, ...) are refused with their v1.0 name: they come from v0.3 clients, which send and read
// v0.3 shapes, so answering them in 1.0 would mislead them; the official SDK speaks 1.0 to this endpoint.
import { isLosslessNumber, type LosslessNumber } from 'lossless-json';
import type { Parsed } from './parse.js';
import { CancelError } from '../node/operations.js';
import { toTask } from './tasks.js';
import { servedCard } from './card.js';
import type { AgentCard } from '../protocol/card/types.js';
import { CODES, RpcError, invalidParams, reasoned, taskOf, type Ctx } from './errors.js';
import { sendMessage, sendStreamingMessage, subscribeToTask, Streamed } from './messages.js';
import { listTasks } from './list.js';
import { PushConfigError } from './push.js';
import { V03_METHODS, servedVersion, versionRefusal } from './version.js';
import type { StreamResponse } from './events.js';
import type { Channel } from './channel.js';

export { CODES, RpcError } from './errors.js';
export { FOLLOW_MS } from './messages.js';

/** Numbers stay as written (lossless), so the answer echoes the id exactly. */
export type Id = string | LosslessNumber | null;
type Params = Record<string, unknown>;
type Method = (ctx: Ctx, params: Params) => Promise<unknown>;

/** One JSON-RPC answer, or an SSE stream of answers (each event `{jsonrpc, id, result}`) for the streaming methods. */
export type Reply = { json: Record<string, unknown> } | { stream: { id: Id; events: Channel<StreamResponse> } };

const METHODS: Record<string, Method> = {
  GetExtendedAgentCard: getExtendedAgentCard,
  SendMessage: sendMessage,
  SendStreamingMessage: sendStreamingMessage,
  GetTask: getTask,
  ListTasks: listTasks,
  CancelTask: cancelTask,
  SubscribeToTask: subscribeToTask,
  CreateTaskPushNotificationConfig: createPushConfig,
  GetTaskPushNotificationConfig: getPushConfig,
  ListTaskPushNotificationConfigs: listPushConfigs,
  DeleteTaskPushNotificationConfig: deletePushConfig,
};

/** Whether a request asks for a stream (its answer is SSE, not one JSON-RPC response). */
export function isStreamingRequest(parsed: Parsed): boolean {
  const method = parsed.ok ? (parsed.value as { method?: unknown } | null)?.method : undefined;
  return method === 'SendStreamingMessage' || method === 'SubscribeToTask';
}

/**
 * One request body, parsed (parse.ts: losslessly, so a capability's arguments reach the service with every
 * digit the client wrote), and the A2A-Version it asked for ('' for none), in; the reply out (never throws).
 */
export async function answerRpc(ctx: Ctx, parsed: Parsed, version: string): Promise<Reply> {
  if (!parsed.ok) return { json: failure(null, new RpcError(CODES.parseError, 'Parse error: the body is not JSON')) };
  const r = parsed.value as Record<string, unknown> | null;
  // Every A2A call expects an answer, so a request without an id (a notification) is refused as well.
  const id = idOf(r?.id);
  if (typeof r !== 'object' || r === null || Array.isArray(r) || r.jsonrpc !== '2.0' || typeof r.method !== 'string' || id === undefined) {
    return {
      json: failure(
        id ?? null,
        new RpcError(CODES.invalidRequest, 'Invalid Request: one JSON-RPC 2.0 request object with an id and a method'),
      ),
    };
  }
  if (!servedVersion(version)) return { json: failure(id, new RpcError(CODES.versionNotSupported, versionRefusal(version, r.method))) };
  const method = METHODS[r.method];
  if (!method) return { json: failure(id, notFound(r.method)) };
  const params = r.params ?? {};
  if (typeof params !== 'object' || params === null || Array.isArray(params))
    return { json: failure(id, new RpcError(CODES.invalidParams, 'Invalid params: params must be an object')) };
  try {
    const result = await method(ctx, params as Params);
    if (result instanceof Streamed) return { stream: { id, events: result.events } };
    return { json: { jsonrpc: '2.0', id, result } };
  } catch (err) {
    return { json: failure(id, asRpcError(err)) };
  }
}

function notFound(method: string): RpcError {
  const v1 = V03_METHODS[method];
  if (v1)
    return new RpcError(CODES.methodNotFound, `Method not found: ${method} is the A2A v0.3 name; in A2A 1.0, served here, it is ${v1}`);
  return new RpcError(CODES.methodNotFound, `Method not found: ${method}`);
}

/** A JSON-RPC id: a string, a number, or null; undefined when absent or of another type. */
function idOf(id: unknown): Id | undefined {
  return typeof id === 'string' || id === null || isLosslessNumber(id) ? id : undefined;
}

export function asRpcError(err: unknown): RpcError {
  if (err instanceof RpcError) return err;
  if (err instanceof PushConfigError) return invalidParams(err.message);
  return new RpcError(CODES.internal, (err as Error).message);
}

export function failure(id: Id, err: RpcError): Record<string, unknown> {
  return { jsonrpc: '2.0', id, error: { code: err.code, message: err.message, ...(err.data !== undefined ? { data: err.data } : {}) } };
}

/** SPEC §6.3, the right-hand column: the same outcome `anet card` shows, as A2A answers it. */
async function getExtendedAgentCard(ctx: Ctx): Promise<unknown> {
  const view = await ctx.operate('card', { aid: ctx.aid });
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
    throw new RpcError(CODES.internal, reasoned(CODES.internal, 'card_stale').message, data);
  }
  // The provider's card (verified by this node, prices and all), pointing here as the public card does.
  if (view.extended === 'ok') return servedCard(view.card as AgentCard, ctx.rpcUrl);
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

async function getTask(ctx: Ctx, params: Params): Promise<unknown> {
  return toTask(await taskOf(ctx, params.id));
}

/**
 * The `cancel` operation: a quote is declined (as `anet reject`), a task under way is stopped by its
 * provider (its service request aborted, a hold released), and the task answered as it then stands:
 * canceled, or still working when the provider has not answered in 10 s. An ended task, or one whose
 * result crossed the cancel, is not cancelable (-32002, with its state).
 */
async function cancelTask(ctx: Ctx, params: Params): Promise<unknown> {
  const record = await taskOf(ctx, params.id);
  let after: Awaited<ReturnType<typeof ctx.operate<'cancel'>>>;
  try {
    after = await ctx.operate('cancel', { task: record.task });
  } catch (err) {
    if (err instanceof CancelError) throw notCancelable(record.task, err.state ?? record.state);
    throw err;
  }
  if (after.state === 'completed' || after.state === 'failed' || after.state === 'rejected') throw notCancelable(record.task, after.state);
  return toTask(after);
}

const notCancelable = (task: string, state: string) =>
  new RpcError(CODES.taskNotCancelable, `Task cannot be canceled: ${task} is ${state}`, { state });

/** CreateTaskPushNotificationConfig: params are a TaskPushNotificationConfig (taskId, url, token, authentication, id). */
async function createPushConfig(ctx: Ctx, params: Params): Promise<unknown> {
  const record = await taskOf(ctx, params.taskId, 'taskId');
  return ctx.push.add(ctx.push.read(record.task, params));
}

async function getPushConfig(ctx: Ctx, params: Params): Promise<unknown> {
  const record = await taskOf(ctx, params.taskId, 'taskId');
  const config = ctx.push.get(record.task, String(params.id ?? ''));
  // §3.1.8: a config that does not exist is TaskNotFoundError.
  if (!config) throw new RpcError(CODES.taskNotFound, `No push notification config ${String(params.id ?? '')} for task ${record.task}`);
  return config;
}

/** All of the task's configs in one page (they are at most MAX_CONFIGS_PER_TASK). */
async function listPushConfigs(ctx: Ctx, params: Params): Promise<unknown> {
  const record = await taskOf(ctx, params.taskId, 'taskId');
  return { configs: ctx.push.list(record.task), nextPageToken: '' };
}

async function deletePushConfig(ctx: Ctx, params: Params): Promise<unknown> {
  const record = await taskOf(ctx, params.taskId, 'taskId');
  ctx.push.remove(record.task, String(params.id ?? ''));
  return null;
}
