// The JSON-RPC and A2A v1.0 error codes the endpoint answers with (A2A §5.4, §9.5), and the lookups every
// method starts with.
import { isLosslessNumber } from 'lossless-json';
import type { Operate, TaskRecord } from '../node/operations.js';
import { explain } from '../protocol/reasons.js';
import type { PushConfigs } from './push.js';

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
  versionNotSupported: -32009,
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

export const invalidParams = (message: string) => new RpcError(CODES.invalidParams, `Invalid params: ${message}`);

/** An error carrying a SPEC §13 reason in `data`, with its sentence as the message too. */
export const reasoned = (code: number, reason: string) => new RpcError(code, explain(reason), { reason, explanation: explain(reason) });

/** What a method works with: the node's operations, the agent this URL is for, the push configs. */
export interface Ctx {
  operate: Operate;
  aid: string;
  push: PushConfigs;
  /** This agent's JSON-RPC URL at this endpoint (the cards served point there). */
  rpcUrl: string;
  /** Aborted when the client has gone before its answer ended: whatever follows a task for it stops (the task goes on). */
  signal: AbortSignal;
}

/** The task by id, when it was sent to this agent (another agent's endpoint does not see it). */
export async function taskOf(ctx: Ctx, id: unknown, field = 'id'): Promise<TaskRecord> {
  if (typeof id !== 'string' || id === '') throw invalidParams(`${field} must be the task id`);
  const record = await ctx.operate('task', { id });
  if (!record || record.to !== ctx.aid) throw new RpcError(CODES.taskNotFound, `Task not found: ${id}`);
  return record;
}

/** A number of the request as a JS number (requests are parsed losslessly: numbers come as LosslessNumber). */
export function numberOf(value: unknown): unknown {
  return isLosslessNumber(value) ? Number(value.value) : value;
}
