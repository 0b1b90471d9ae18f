// The node's operations (docs/ARCHITECTURE.md, Layers: application): one table giving, for each, its
// argument type, its result type and what runs it on a Node. Every surface reaches the node through it:
// the daemon's control socket serves exactly this table, the CLI and `anet mcp` run it through `run`
// (open.ts: through the daemon when one runs, else in-process), the A2A endpoint calls `operate` on the
// daemon's own node. Results are plain JSON data (no bigint, bytes or Date), so an answer that crossed the
// control socket is the same value as one computed in-process.
import { z } from 'zod';
import type { Node, CardView } from './node.js';
import type { OwnCard } from '../card/publish.js';
import type { ReadCard } from '../reader/reader.js';
import type { Account } from '../protocol/hub-api.js';
import type { TaskRecord, TaskUpdate, OnUpdate } from './caller/index.js';
import type { InboxEntry } from './provider/text.js';
import { auditCards, auditPrices, type CardAuditRow, type PriceAudit } from './audit.js';
import { nodeStatus, type NodeStatus } from './status.js';

// The result types, for the surfaces that show them, and the refusal `pay` and `reject` throw.
export type { NodeStatus, CapabilityStatus, WindowUse } from './status.js';
export type { CardView, OwnCard, ReadCard, Account, TaskRecord, InboxEntry, CardAuditRow, PriceAudit, TaskUpdate, OnUpdate };
export { PaymentError } from './caller/payment.js';
export { CancelError, CANCEL_WAIT_MS } from './caller/index.js';

/** A file sent with a call: inline (base64) or uploaded already (caller/files.ts). */
export type { FileArg, UploadedFileArg } from './caller/files.js';
import type { FileArg } from './caller/files.js';

/** Arguments of an operation that takes none. */
export type NoArgs = Record<string, never>;

export interface FindArgs {
  q?: string;
  skill?: string;
  tag?: string;
  limit?: number;
}

/** A row of `anet find --json` and MCP `find_agents`: the directory's answer without each whole card. */
export type AgentRow = Omit<ReadCard, 'card'>;

export interface CallArgs {
  aid: string;
  capability: string;
  /** The capability's arguments as JSON text (the caller checked it is JSON; A2A keeps every digit). */
  args: string;
  files: FileArg[];
  /** How long to wait for a final state before answering with the task as it stands. */
  waitMs: number;
  /** The A2A contextId of the client, kept on the task's record. */
  context?: string;
  /** Told of each change of the task and each preview; across the control socket as NDJSON lines (control.ts). */
  onUpdate?: OnUpdate;
  /** Ends the wait (not the task) when the one following has gone; the control socket aborts it when its client does. */
  signal?: AbortSignal;
}

export interface SendArgs {
  aid: string;
  text: string;
  waitMs: number;
  context?: string;
  onUpdate?: OnUpdate;
  signal?: AbortSignal;
}

export interface WatchArgs {
  task: string;
  /** How long to follow it at most; the record as it then stands is the result. */
  waitMs: number;
  onUpdate?: OnUpdate;
  signal?: AbortSignal;
}

export interface PayArgs {
  task: string;
  waitMs?: number;
  /** As for `call`. */
  onUpdate?: OnUpdate;
  signal?: AbortSignal;
}

/** Each operation's arguments and result. The names are the control socket's paths (`POST /<name>`). */
export interface Operations {
  /** The node's AID, and the hub it uses (what `anet call --file` uploads to, without reading the config). */
  ping: { args: NoArgs; result: { aid: string; hub: string } };
  status: { args: NoArgs; result: NodeStatus };
  publish: { args: NoArgs; result: { own: OwnCard; outcome: 'published' | 'withdrawn' } };
  find: { args: FindArgs; result: AgentRow[] };
  /** SPEC §6.3–6.4: the public card and, when §6.1 allows a fetch, the extended card. */
  card: { args: { aid: string }; result: CardView };
  /** The public card alone, verified against the KEL (no extended-card fetch): what the A2A endpoint serves. */
  'public-card': { args: { aid: string }; result: ReadCard };
  call: { args: CallArgs; result: TaskRecord };
  send: { args: SendArgs; result: TaskRecord };
  /** Follows a task: its record, then each change and preview, until it ends or `waitMs` passes. */
  watch: { args: WatchArgs; result: TaskRecord };
  /** Cancels a task: a quote is declined, a running call stopped by its provider (issue 21). */
  cancel: { args: { task: string; waitMs?: number }; result: TaskRecord };
  tasks: { args: NoArgs; result: TaskRecord[] };
  task: { args: { id: string }; result: TaskRecord | null };
  pay: { args: PayArgs; result: TaskRecord };
  reject: { args: { task: string }; result: TaskRecord };
  inbox: { args: NoArgs; result: InboxEntry[] };
  reply: { args: { task: string; text: string }; result: InboxEntry };
  'audit-cards': { args: { aid?: string }; result: CardAuditRow[] };
  'audit-prices': { args: { aid: string }; result: PriceAudit };
  balance: { args: NoArgs; result: Account };
}

export type OpName = keyof Operations;
export type ArgsOf<K extends OpName> = Operations[K]['args'];
export type ResultOf<K extends OpName> = Operations[K]['result'];

/** Runs operations somewhere (a node here, or a daemon's through its socket): what a surface is handed. */
export type Operate = <K extends OpName>(op: K, args: ArgsOf<K>) => Promise<ResultOf<K>>;

const TABLE: { [K in OpName]: (node: Node, args: ArgsOf<K>) => Promise<ResultOf<K>> } = {
  ping: async (node) => ({ aid: node.identity.aid, hub: node.client.base }),
  status: (node) => nodeStatus(node),
  publish: (node) => node.publish(),
  find: async (node, args) => findData(await node.find(args)),
  card: (node, { aid }) => node.card(aid),
  'public-card': (node, { aid }) => node.reader.publicCard(aid),
  call: (node, a) => node.caller.call(a.aid, a.capability, a.args, a.files, a.waitMs, follow(a)),
  send: (node, a) => node.caller.send(a.aid, a.text, a.waitMs, follow(a)),
  watch: (node, a) => node.caller.watch(a.task, a.waitMs, a.onUpdate, a.signal),
  cancel: (node, a) => node.caller.cancel(a.task, a.waitMs),
  tasks: (node) => node.caller.tasks(),
  task: async (node, { id }) => (await node.caller.task(id)) ?? null,
  pay: (node, a) => node.caller.pay(a.task, a.waitMs ?? 0, a.onUpdate, a.signal),
  reject: (node, { task }) => node.caller.reject(task),
  inbox: (node) => node.inbox(),
  reply: (node, { task, text }) => node.reply(task, text),
  'audit-cards': (node, { aid }) => auditCards(node, aid),
  'audit-prices': (node, { aid }) => auditPrices(node, aid),
  balance: (node) => node.client.account(node.identity.aid),
};

/** Who follows a task a surface starts, and its client's contextId. */
const follow = (a: { onUpdate?: OnUpdate; context?: string; signal?: AbortSignal }) => ({
  ...(a.onUpdate ? { onUpdate: a.onUpdate } : {}),
  ...(a.context !== undefined ? { context: a.context } : {}),
  ...(a.signal ? { signal: a.signal } : {}),
});

const none = z.object({});
const aidArg = z.object({ aid: z.string() });

/**
 * What each operation takes as JSON over the control socket, checked there before it runs (callers in
 * this process are checked by the compiler; `onUpdate` and `signal` never cross the socket). A missing `files` is none.
 */
const WIRE_ARGS: { [K in OpName]: z.ZodType<Omit<ArgsOf<K>, 'onUpdate' | 'signal'>> } = {
  ping: none,
  status: none,
  publish: none,
  find: z.object({ q: z.string().optional(), skill: z.string().optional(), tag: z.string().optional(), limit: z.number().optional() }),
  card: aidArg,
  'public-card': aidArg,
  call: z.object({
    aid: z.string(),
    capability: z.string(),
    args: z.string(),
    files: z
      .array(
        z.union([
          z.object({ name: z.string(), data_b64: z.string() }),
          z.object({ name: z.string(), cid: z.string(), size: z.number(), key_b64: z.string(), chunk: z.number() }),
        ]),
      )
      .default([]),
    waitMs: z.number(),
    context: z.string().optional(),
  }),
  send: z.object({ aid: z.string(), text: z.string(), waitMs: z.number(), context: z.string().optional() }),
  watch: z.object({ task: z.string(), waitMs: z.number() }),
  cancel: z.object({ task: z.string(), waitMs: z.number().optional() }),
  tasks: none,
  task: z.object({ id: z.string() }),
  pay: z.object({ task: z.string(), waitMs: z.number().optional() }),
  reject: z.object({ task: z.string() }),
  inbox: none,
  reply: z.object({ task: z.string(), text: z.string() }),
  'audit-cards': z.object({ aid: z.string().optional() }),
  'audit-prices': aidArg,
  balance: none,
};

/** `op`'s arguments from JSON, or an error naming the first wrong field: `bad arguments for "call": files: …`. */
export function wireArgs<K extends OpName>(op: K, json: unknown): ArgsOf<K> {
  const parsed = WIRE_ARGS[op].safeParse(json);
  if (parsed.success) return parsed.data as ArgsOf<K>;
  const issue = parsed.error.issues[0]!;
  const where = issue.path.length ? `${issue.path.join('.')}: ` : '';
  throw new Error(`bad arguments for "${op}": ${where}${issue.message}`);
}

/** The names of the table, in its order: what the control socket serves. */
export const OP_NAMES = Object.keys(TABLE) as OpName[];

export const isOpName = (name: string): name is OpName => Object.hasOwn(TABLE, name);

/** Runs one operation on a node in this process. */
export function operate<K extends OpName>(node: Node, op: K, args: ArgsOf<K>): Promise<ResultOf<K>> {
  const run = TABLE[op] as (node: Node, args: ArgsOf<K>) => Promise<ResultOf<K>>;
  return run(node, args);
}

/** The table bound to one node in this process: what the daemon hands its A2A endpoint. */
export const operatorOf =
  (node: Node): Operate =>
  (op, args) =>
    operate(node, op, args);

/** The rows of `find`: each without its whole card (the card is `card`'s answer). */
export function findData(rows: ReadCard[]): AgentRow[] {
  return rows.map(({ card: _c, ...r }) => r);
}

/** The data of `anet card --json` and MCP `get_agent_card` (SPEC §6.4: exactly the same). */
export function cardData(view: CardView): Omit<CardView, 'name' | 'skills'> {
  const { name: _n, skills: _s, ...data } = view;
  return data;
}
