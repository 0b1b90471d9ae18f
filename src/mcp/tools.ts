// The MCP tools of `anet mcp` (SPEC §12). Each tool is one operation of the node's table
// (src/node/operations.ts), run through the daemon when it runs (else in-process), so MCP, the CLI and
// the daemon always agree.
import { z } from 'zod';
import { cardData, type OnUpdate, type Operate } from '../node/operations.js';
import { isAid } from '../identity/cid.js';
import * as out from './schemas.js';

/** A tool's answer is data; a thrown `ToolError` (or any error) becomes an MCP tool error of one line. */
export class ToolError extends Error {
  override name = 'ToolError';
}

export interface Tool {
  name: string;
  title: string;
  description: string;
  input: z.ZodRawShape;
  /** The fields of the tool's structured content (its `outputSchema`). */
  output: z.ZodRawShape;
  readOnly: boolean;
  /** The tool follows a task: it reports the task's updates as progress, and a cancelled request cancels it. */
  follows?: boolean;
  /** The tool's data: always an object (MCP structured content is one). `onUpdate` only when `follows`. */
  run(operate: Operate, input: Record<string, unknown>, onUpdate?: OnUpdate): Promise<object>;
}

/** A tool whose `run` takes the input its schema describes (the MCP server has checked it against it). */
function tool<S extends z.ZodRawShape>(
  def: Omit<Tool, 'input' | 'run'> & {
    input: S;
    run(operate: Operate, input: z.output<z.ZodObject<S>>, onUpdate?: OnUpdate): Promise<object>;
  },
): Tool {
  return def as unknown as Tool;
}

/**
 * How long call_capability and send_text wait for the final answer. Below the 60 s an MCP client waits
 * for a tool by default; a task still running after it is left to get_task.
 */
export const CALL_WAIT_MS = 50_000;
/** As `anet send`: a text task may wait for the other side's operator, so only briefly. */
export const SEND_WAIT_MS = 15_000;

const aid = z.string().describe('The agent\'s full AID (starts with "bafyrei"), as find_agents returns it.');
const task = z.string().describe('The task id, as call_capability, send_text or list_tasks return it in `task`.');

function checkAid(text: string): string {
  if (!isAid(text)) throw new ToolError(`"${text}" is not a full AID (bafyrei...), as find_agents returns it`);
  return text;
}

export const TOOLS: Tool[] = [
  tool({
    name: 'find_agents',
    title: 'Find agents',
    description:
      'Searches the hub directory for agents by words, skill id or tag, without contacting any agent. Each row has the AID, name, skills, whether calls are free or paid (`charge`) and whether its card verified (`key`).',
    input: {
      query: z.string().optional().describe('Words to look for in agent names, descriptions and skills; empty lists all agents.'),
      skill: z.string().optional().describe('Only agents offering this exact skill id, e.g. "text.translate".'),
      tag: z.string().optional().describe('Only agents with this skill tag.'),
      limit: z.number().int().min(1).max(100).optional().describe('At most this many agents (1 to 100, default 20).'),
    },
    output: out.agents,
    readOnly: true,
    async run(operate, i) {
      return { agents: await operate('find', { q: i.query ?? '', skill: i.skill, tag: i.tag, limit: i.limit }) };
    },
  }),
  tool({
    name: 'get_agent_card',
    title: 'Get an agent card',
    description:
      "An agent's card, verified against its key history: its skills, and its signed prices when the agent has them (the extended card). `reason` and `explanation` say why only the public card is shown; read this before calling a capability.",
    input: { aid },
    output: out.card,
    readOnly: true,
    async run(operate, i) {
      return cardData(await operate('card', { aid: checkAid(i.aid) }));
    },
  }),
  tool({
    name: 'call_capability',
    title: 'Call a capability',
    description: `Calls another agent's capability (a skill id from its card) with JSON arguments and waits up to ${CALL_WAIT_MS / 1000} s. Returns the task: \`completed\` with \`result\` and a verified \`receipt\`, or \`rejected\`/\`failed\`/\`input-required\` with \`reason\` and \`explanation\`; if still \`submitted\` or \`working\`, ask get_task later.`,
    input: {
      aid,
      capability: z.string().describe('The capability (skill) id, as get_agent_card lists it, e.g. "text.translate".'),
      args: z
        .record(z.string(), z.unknown())
        .optional()
        .describe('The arguments: a JSON object as the capability describes it (default {}).'),
      files: z
        .array(
          z.object({
            name: z.string().describe('The file name, e.g. "photo.png".'),
            data_b64: z.string().describe("The file's bytes in base64."),
          }),
        )
        .optional()
        .describe('Files to attach, for capabilities that accept them.'),
    },
    output: out.taskRecord,
    readOnly: false,
    follows: true,
    async run(operate, i, onUpdate) {
      const args = {
        aid: checkAid(i.aid),
        capability: i.capability,
        args: JSON.stringify(i.args ?? {}),
        files: i.files ?? [],
        waitMs: CALL_WAIT_MS,
        ...(onUpdate ? { onUpdate } : {}),
      };
      return operate('call', args);
    },
  }),
  tool({
    name: 'send_text',
    title: 'Send a text message',
    description:
      'Sends a text task to another agent (its own agent answers, or its operator later). Returns the task: `completed` with the answer in `result.text`, `working` while it waits for the operator (ask get_task later), or a refusal with `reason` and `explanation`.',
    input: { aid, text: z.string().min(1).describe('The message for the other agent.') },
    output: out.taskRecord,
    readOnly: false,
    follows: true,
    async run(operate, i, onUpdate) {
      return operate('send', { aid: checkAid(i.aid), text: i.text, waitMs: SEND_WAIT_MS, ...(onUpdate ? { onUpdate } : {}) });
    },
  }),
  tool({
    name: 'get_task',
    title: 'Get a task',
    description: 'One task this node sent (a capability call or a text message): its state, result, receipt, or reason and explanation.',
    input: { task },
    output: out.taskRecord,
    readOnly: true,
    async run(operate, i) {
      const record = await operate('task', { id: i.task });
      if (!record) throw new ToolError(`no task ${i.task}`);
      return record;
    },
  }),
  tool({
    name: 'list_tasks',
    title: 'List tasks',
    description: 'Every task this node sent, oldest first, with its state; use get_task for one of them.',
    input: {},
    output: out.tasks,
    readOnly: true,
    async run(operate) {
      return { tasks: await operate('tasks', {}) };
    },
  }),
  tool({
    name: 'pay_task',
    title: 'Pay a task',
    description: `Pays a task that waits for payment (\`input-required\`) at the amount its quote names, when it was not paid automatically; the call then runs and this waits up to ${CALL_WAIT_MS / 1000} s for its answer, like call_capability. Check the quote (\`payment\`) against the prices on the agent's card first.`,
    input: { task },
    output: out.taskRecord,
    readOnly: false,
    follows: true,
    async run(operate, i, onUpdate) {
      return operate('pay', { task: i.task, waitMs: CALL_WAIT_MS, ...(onUpdate ? { onUpdate } : {}) });
    },
  }),
  tool({
    name: 'reject_task',
    title: "Reject a task's quote",
    description:
      'Declines to pay a task that waits for payment (`input-required`): the task ends `canceled` (reason `payment_rejected`) without running, and nothing is charged.',
    input: { task },
    output: out.taskRecord,
    readOnly: false,
    async run(operate, i) {
      return operate('reject', { task: i.task });
    },
  }),
  tool({
    name: 'get_balance',
    title: 'Get the balance',
    description:
      "This node's credits on its hub's ledger, which pay for priced capabilities: `balance`, `held` (reserved for paid calls still running) and the newest entries of its `history`.",
    input: {},
    output: out.balance,
    readOnly: true,
    async run(operate) {
      return operate('balance', {});
    },
  }),
];
