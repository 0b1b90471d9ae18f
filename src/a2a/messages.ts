// SendMessage, SendStreamingMessage and SubscribeToTask (A2A v1.0 §3.1.1, §3.1.2, §3.1.6).
//
// Blocking SendMessage (the default) answers once the task has ended or waits for the client (a quote
// left to it, input-required), §3.2.2; `returnImmediately: true` answers as soon as the task is sent. A
// text task waits for the other side's operator, so blocking on one waits for that answer.
// The streams begin with the Task, then its status and artifact updates (events.ts), and close when it
// has ended; SendStreamingMessage's also closes when it waits for the client (input-required), as a
// blocking SendMessage answers then: the client answers the quote and subscribes again.
import type { OnUpdate, TaskRecord, TaskUpdate } from '../node/operations.js';
import { PaymentError } from '../node/operations.js';
import { Channel } from './channel.js';
import { CODES, RpcError, invalidParams, taskOf, type Ctx } from './errors.js';
import { TaskEvents, type StreamResponse } from './events.js';
import { PushConfigError } from './push.js';
import { MessageError, readMessage, toTask, type Decision, type Request } from './tasks.js';

/**
 * How long a blocking SendMessage or a stream follows a task at most: past a day, the caller has given up
 * on a silent provider anyway (RESEND_SILENT_WORKING_MS), so the task has ended one way or another.
 */
export const FOLLOW_MS = 25 * 3_600_000;

type Params = Record<string, unknown>;

/** A method's answer that is a stream of StreamResponses (SSE), not one result. */
export class Streamed {
  constructor(readonly events: Channel<StreamResponse>) {}
}

const final = (r: TaskRecord) => ['completed', 'failed', 'rejected', 'canceled'].includes(r.state);

export async function sendMessage(ctx: Ctx, params: Params): Promise<unknown> {
  const request = readRequest(params);
  const push = readPush(ctx, params);
  const immediately = (params.configuration as { returnImmediately?: unknown } | undefined)?.returnImmediately === true;
  const waitMs = immediately ? 0 : FOLLOW_MS;
  if (request.kind === 'continue') return { task: toTask(await continueTask(ctx, request, waitMs)) };
  return { task: toTask(await startTask(ctx, request, waitMs, push)) };
}

export async function sendStreamingMessage(ctx: Ctx, params: Params): Promise<Streamed> {
  const request = readRequest(params);
  const push = readPush(ctx, params);
  if (request.kind === 'continue') {
    // The answer to a quote: the task goes on, and the stream follows it from there.
    const record = await continueTask(ctx, request, 0);
    return follow((onUpdate) => ctx.operate('watch', { task: record.task, waitMs: FOLLOW_MS, onUpdate, signal: ctx.signal }));
  }
  return follow((onUpdate) => startTask(ctx, request, FOLLOW_MS, push, onUpdate));
}

/** §3.1.6: the task as it stands, then its updates until it ends; an ended task cannot be subscribed to. */
export async function subscribeToTask(ctx: Ctx, params: Params): Promise<Streamed> {
  const record = await taskOf(ctx, params.id);
  if (final(record))
    throw new RpcError(CODES.unsupported, `Task ${record.task} is ${record.state}: it has ended; GetTask gives it`, {
      state: record.state,
    });
  return follow((onUpdate) => ctx.operate('watch', { task: record.task, waitMs: FOLLOW_MS, onUpdate, signal: ctx.signal }));
}

function readRequest(params: Params): Request {
  try {
    return readMessage(params.message);
  } catch (err) {
    if (!(err instanceof MessageError)) throw err;
    throw new RpcError(err.unsupported ? CODES.unsupported : CODES.invalidParams, `Invalid params: ${err.message}`);
  }
}

/** A push config sent with the message (configuration.taskPushNotificationConfig), checked before the task starts. */
function readPush(ctx: Ctx, params: Params): Record<string, unknown> | null {
  const raw = (params.configuration as { taskPushNotificationConfig?: unknown } | undefined)?.taskPushNotificationConfig;
  if (raw === undefined || raw === null) return null;
  if (typeof raw !== 'object') throw invalidParams('configuration.taskPushNotificationConfig must be an object');
  try {
    ctx.push.read('', raw as Record<string, unknown>);
  } catch (err) {
    if (err instanceof PushConfigError) throw invalidParams(err.message);
    throw err;
  }
  return raw as Record<string, unknown>;
}

/**
 * Starts a task and resolves as `waitMs` allows: a call once it has ended or waits for the client; a text
 * task once answered (send returns when it reaches the other side's inbox, then it is watched).
 */
async function startTask(
  ctx: Ctx,
  request: Exclude<Request, { kind: 'continue' }>,
  waitMs: number,
  push: Record<string, unknown> | null,
  onUpdate?: OnUpdate,
): Promise<TaskRecord> {
  let registered = push === null;
  // The push config joins the task as soon as its id is known: its first record.
  const updates = (u: TaskUpdate) => {
    if (!registered && u.type === 'record') {
      registered = true;
      ctx.push.add(ctx.push.read(u.record.task, push!));
    }
    onUpdate?.(u);
  };
  const context = request.context !== undefined ? { context: request.context } : {};
  if (request.kind === 'call') {
    const files = request.files;
    return ctx.operate('call', {
      aid: ctx.aid,
      capability: request.capability,
      args: request.argsText,
      files,
      waitMs,
      ...context,
      onUpdate: updates,
      signal: ctx.signal,
    });
  }
  const sent = await ctx.operate('send', { aid: ctx.aid, text: request.text, waitMs, ...context, onUpdate: updates, signal: ctx.signal });
  if (waitMs === 0 || final(sent)) return sent;
  return ctx.operate('watch', { task: sent.task, waitMs, ...(onUpdate ? { onUpdate } : {}), signal: ctx.signal });
}

/**
 * A message with a taskId (§3.4): the task must exist here (-32001) and be the client's context; an ended
 * task takes no more messages (-32004), and the only message a task under way takes is the answer to its
 * quote (a2a-x402): paid by this node as `anet pay` does, or declined as `anet reject`.
 */
async function continueTask(ctx: Ctx, request: Extract<Request, { kind: 'continue' }>, waitMs: number): Promise<TaskRecord> {
  const record = await taskOf(ctx, request.task, 'message.taskId');
  const context = record.context ?? record.task;
  if (request.context !== undefined && request.context !== context)
    throw invalidParams(`message.contextId ${request.context} is not the context of task ${record.task} (${context})`);
  if (final(record) && request.decision === null)
    throw new RpcError(CODES.unsupported, `Task ${record.task} is ${record.state}: it has ended and takes no more messages`, {
      state: record.state,
    });
  if (request.decision === null)
    throw new RpcError(
      CODES.unsupported,
      'a message continues a task only to answer its payment quote (metadata x402.payment.status: payment-submitted or payment-rejected); any other message starts a new anet task',
      { state: record.state },
    );
  return answerQuote(ctx, record, request.decision, waitMs);
}

async function answerQuote(ctx: Ctx, record: TaskRecord, decision: Decision, waitMs: number): Promise<TaskRecord> {
  try {
    return decision === 'payment-submitted'
      ? await ctx.operate('pay', { task: record.task, waitMs, signal: ctx.signal })
      : await ctx.operate('reject', { task: record.task });
  } catch (err) {
    if (err instanceof PaymentError) throw new RpcError(CODES.invalidParams, `Invalid params: ${err.message}`, { state: record.state });
    throw err;
  }
}

/**
 * A stream of one task: `run` follows it, passing each update on, and settles when it has ended (or
 * waits for the client). The stream answers only once the first update came: a failure before any (the
 * task could not be sent, say) is the method's error, a plain JSON-RPC answer rather than a stream.
 */
async function follow(run: (onUpdate: OnUpdate) => Promise<TaskRecord>): Promise<Streamed> {
  const channel = new Channel<StreamResponse>();
  const events = new TaskEvents('task');
  let began!: () => void;
  const first = new Promise<void>((resolve) => {
    began = resolve;
  });
  const onUpdate = (u: TaskUpdate) => {
    for (const event of events.next(u)) channel.push(event);
    began();
  };
  const running = run(onUpdate).then(
    // The record it settled with may be one no update told yet (it is no event if it was told).
    (last) => {
      onUpdate({ type: 'record', record: last });
      channel.end();
    },
    (err: Error) => {
      channel.end(err instanceof RpcError ? err : new RpcError(CODES.internal, err.message));
      throw err;
    },
  );
  await Promise.race([first, running]);
  running.catch(() => {}); // told on the stream
  return new Streamed(channel);
}
