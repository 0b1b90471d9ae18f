// The MCP resources of `anet mcp` (issue 21): agent cards and sent tasks as JSON a client can attach or
// read without a tool call. Each is the same data as its tool: `anet://agents/<AID>/card` is get_agent_card,
// `anet://tasks/<id>` is get_task. Tasks are listed (they are this node's own, few and local); agents are
// not (the directory is the hub's and may be large: find_agents searches it).
import { type McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { McpError, type ReadResourceResult } from '@modelcontextprotocol/sdk/types.js';
import { isAid } from '../identity/cid.js';
import { cardData, type Operate } from '../node/operations.js';
import { jsonReplacer } from '../util/json.js';

/** MCP's "resource not found" (the specification's -32002; the SDK has no name for it). */
const RESOURCE_NOT_FOUND = -32002;

export const cardUri = (aid: string) => `anet://agents/${aid}/card`;
export const taskUri = (task: string) => `anet://tasks/${task}`;

export function registerResources(server: McpServer, operate: Operate): void {
  server.registerResource(
    'agent-card',
    new ResourceTemplate('anet://agents/{aid}/card', { list: undefined }),
    {
      title: 'Agent card',
      description: "An agent's card verified against its key history, with its signed prices when it has them: get_agent_card's data.",
      mimeType: 'application/json',
    },
    async (uri, { aid }) => {
      const id = String(aid);
      if (!isAid(id)) throw new McpError(RESOURCE_NOT_FOUND, `"${id}" is not a full AID (bafyrei...), as find_agents returns it`);
      return json(uri.href, cardData(await operate('card', { aid: id })));
    },
  );
  server.registerResource(
    'task',
    new ResourceTemplate('anet://tasks/{task}', {
      list: async () => ({
        resources: (await operate('tasks', {})).map((r) => ({
          uri: taskUri(r.task),
          name: `${r.capability} to ${r.to.slice(0, 16)}…: ${r.state}`,
          mimeType: 'application/json',
        })),
      }),
    }),
    {
      title: 'Task',
      description: "A task this node sent: its state, result, receipt, or reason and explanation: get_task's data.",
      mimeType: 'application/json',
    },
    async (uri, { task }) => {
      const record = await operate('task', { id: String(task) });
      if (!record) throw new McpError(RESOURCE_NOT_FOUND, `no task ${String(task)}`);
      return json(uri.href, record);
    },
  );
}

/** One JSON document, as the tools' text content is (two-space indented). */
function json(uri: string, data: object): ReadResourceResult {
  return { contents: [{ uri, mimeType: 'application/json', text: JSON.stringify(data, jsonReplacer, 2) }] };
}
