// ListTasks (A2A v1.0 §3.1.4): the tasks this node sent to the agent of this URL, most recently updated
// first, filtered by contextId, status and statusTimestampAfter, in pages.
//
// The page token is a cursor: the (updatedAt, task id) of the last task of the page, base64url JSON. The
// next page is the tasks after that place in the order, so a token stays good however the list changes
// (a task updated since moves to the front, out of the pages still to come, and none is given twice
// unless it changed in between).
import type { TaskRecord } from '../node/operations.js';
import { invalidParams, numberOf, type Ctx } from './errors.js';
import { STATES, contextOf, toTask } from './tasks.js';

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 100;

type Params = Record<string, unknown>;
type Cursor = [updatedAt: number, task: string];

export async function listTasks(ctx: Ctx, params: Params): Promise<unknown> {
  const pageSize = readPageSize(numberOf(params.pageSize));
  const after = params.pageToken === undefined || params.pageToken === '' ? null : readToken(params.pageToken);
  const keep = readFilter(params);
  const historyLength = numberOf(params.historyLength);
  // Tasks here keep no history (the status message says where a task stands), so it is checked and unused.
  if (historyLength !== undefined && !(Number.isInteger(historyLength) && (historyLength as number) >= 0))
    throw invalidParams('historyLength must be a non-negative integer');
  const includeArtifacts = params.includeArtifacts === true;

  const matching = (await ctx.operate('tasks', {})).filter((r) => r.to === ctx.aid && keep(r)).sort(newestFirst);
  const start = after === null ? 0 : matching.findIndex((r) => newestFirst(r, { updatedAt: after[0], task: after[1] }) > 0);
  const rest = start < 0 ? [] : matching.slice(start);
  const page = rest.slice(0, pageSize);
  const last = page[page.length - 1];
  return {
    tasks: page.map((r) => withoutArtifacts(toTask(r), includeArtifacts)),
    nextPageToken: rest.length > pageSize && last ? token([last.updatedAt, last.task]) : '',
    pageSize,
    totalSize: matching.length,
  };
}

/** Most recently updated first (§3.1.4); the task id orders those updated in the same millisecond. */
function newestFirst(a: Pick<TaskRecord, 'updatedAt' | 'task'>, b: Pick<TaskRecord, 'updatedAt' | 'task'>): number {
  return b.updatedAt - a.updatedAt || (a.task < b.task ? -1 : a.task > b.task ? 1 : 0);
}

function readPageSize(value: unknown): number {
  if (value === undefined) return DEFAULT_PAGE_SIZE;
  if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > MAX_PAGE_SIZE)
    throw invalidParams(`pageSize must be between 1 and ${MAX_PAGE_SIZE}, got ${JSON.stringify(value)}`);
  return value as number;
}

/** The filters given: contextId, status (a TaskState name), statusTimestampAfter (ISO 8601, inclusive). */
function readFilter(params: Params): (r: TaskRecord) => boolean {
  const checks: ((r: TaskRecord) => boolean)[] = [];
  if (params.contextId !== undefined && params.contextId !== '') {
    if (typeof params.contextId !== 'string') throw invalidParams('contextId must be a string');
    checks.push((r) => contextOf(r) === params.contextId);
  }
  if (params.status !== undefined && params.status !== 'TASK_STATE_UNSPECIFIED') {
    const names = Object.values(STATES);
    if (typeof params.status !== 'string' || (!names.includes(params.status) && params.status !== 'TASK_STATE_AUTH_REQUIRED'))
      throw invalidParams(
        `status must be one of ${[...names, 'TASK_STATE_AUTH_REQUIRED'].join(', ')}, got ${JSON.stringify(params.status)}`,
      );
    checks.push((r) => STATES[r.state] === params.status);
  }
  if (params.statusTimestampAfter !== undefined) {
    const at = typeof params.statusTimestampAfter === 'string' ? Date.parse(params.statusTimestampAfter) : Number.NaN;
    if (Number.isNaN(at)) throw invalidParams('statusTimestampAfter must be an ISO 8601 timestamp (e.g. 2026-12-03T10:00:00Z)');
    checks.push((r) => r.updatedAt >= at);
  }
  return (r) => checks.every((check) => check(r));
}

function token(cursor: Cursor): string {
  return Buffer.from(JSON.stringify(cursor)).toString('base64url');
}

function readToken(value: unknown): Cursor {
  try {
    const cursor = JSON.parse(Buffer.from(String(value), 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(cursor) && cursor.length === 2 && Number.isInteger(cursor[0]) && typeof cursor[1] === 'string')
      return cursor as Cursor;
  } catch {
    // not JSON: said below
  }
  throw invalidParams('pageToken is not one a ListTasks answer gave (nextPageToken)');
}

/** §3.1.4: without includeArtifacts, the artifacts field is left out entirely. */
function withoutArtifacts(task: Record<string, unknown>, include: boolean): Record<string, unknown> {
  if (include) return { ...task, artifacts: task.artifacts ?? [] };
  const { artifacts: _left, ...rest } = task;
  return rest;
}
