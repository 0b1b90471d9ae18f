// `anet mcp` (SPEC §12): an MCP server on stdio whose tools are operations of the node's table
// (src/node/operations.ts), run through the daemon when it runs, else in-process. stdout carries the protocol only; log lines go to stderr.
import { readFileSync } from 'node:fs';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { Operate } from '../node/operations.js';
import { jsonReplacer } from '../util/json.js';
import { TOOLS, type Tool } from './tools.js';
import { LineStdioTransport } from './stdio.js';
import { nodeOperations } from './node.js';
import { TaskFollow, type Extra } from './follow.js';
import { registerResources } from './resources.js';

const INSTRUCTIONS =
  'Tools of an anet node on an agent network: find agents in the hub directory, read their verified cards and prices, ' +
  'call their capabilities or send them text, follow the tasks sent, pay or reject quotes, and see the credit balance. ' +
  'A refusal is data, not an error: the task or card carries `reason` and a one-sentence `explanation`.';

/**
 * The MCP server with the nine tools and two resource templates (resources.ts); `operate` runs one
 * operation of the node's table. Calls run side by side: the SDK starts each request's handler as it
 * arrives, and `operate` (node.ts) needs no queue.
 */
export function mcpServer(operate: Operate, log: (line: string) => void = () => {}): McpServer {
  const server = new McpServer({ name: 'anet', version: packageVersion() }, { instructions: INSTRUCTIONS });
  const session: Session = { operate, log, open: () => server.server.transport !== undefined };
  for (const tool of TOOLS) {
    const annotations = { readOnlyHint: tool.readOnly, openWorldHint: true };
    // Open objects, as in schemas.ts: a field added to a result later is no validation error.
    const outputSchema = z.looseObject(tool.output);
    server.registerTool(
      tool.name,
      { title: tool.title, description: tool.description, inputSchema: tool.input, outputSchema, annotations },
      (input, extra) => runTool(tool, input as Record<string, unknown>, extra, session),
    );
  }
  registerResources(server, operate);
  // The SDK declares `listChanged: true` for any server with tools or resources. The tools never change;
  // the tasks listed do, but no notification says so (a task sent by the CLI would go unseen): a client
  // told either may change would wait for notifications that never come.
  server.server.registerCapabilities({ tools: { listChanged: false }, resources: { listChanged: false } });
  return server;
}

interface Session {
  operate: Operate;
  log: (line: string) => void;
  /** Whether the MCP session still has its transport. */
  open: () => boolean;
}

/** One tool call: its data, or a tool error of one line; a tool that follows a task reports and cancels it. */
async function runTool(tool: Tool, input: Record<string, unknown>, extra: Extra, { operate, log, open }: Session) {
  const cancel = (task: string) => cancelTask(operate, tool.name, task, log);
  const follow = tool.follows ? new TaskFollow(extra, cancel, open, taskOf(input)) : null;
  try {
    return dataResult(await tool.run(operate, input, follow?.onUpdate));
  } catch (err) {
    const result = errorResult(err);
    log(`${tool.name}: ${(result.content[0] as { text: string }).text}`);
    return result;
  } finally {
    follow?.end();
  }
}

const taskOf = (input: Record<string, unknown>) => (typeof input.task === 'string' ? input.task : undefined);

/** The client cancelled the request that follows `task`: the task is cancelled too (its answer is logged). */
function cancelTask(operate: Operate, tool: string, task: string, log: (line: string) => void): void {
  const said = `${tool}: the client cancelled its request; task ${task}`;
  operate('cancel', { task }).then(
    (record) => log(`${said} is now ${record.state}`),
    (err: Error) => log(`${said} ${hadEnded(err) ? 'had ended already' : `was not cancelled: ${err.message}`}`),
  );
}

/** The `cancel` operation's refusal of a task that has ended, in-process or through the daemon. */
const hadEnded = (err: Error) => err.name === 'CancelError' || (err as { remoteName?: string }).remoteName === 'CancelError';

/** The data as JSON text (as `--json` prints it) and as structured content (the same JSON). */
export function dataResult(data: object): CallToolResult {
  const text = JSON.stringify(data, jsonReplacer, 2);
  return { content: [{ type: 'text', text }], structuredContent: JSON.parse(text) };
}

/** A real error (hub unreachable, bad AID, no such task): an MCP tool error of one line. */
export function errorResult(err: unknown): CallToolResult {
  const message = err instanceof Error ? err.message : String(err);
  return { content: [{ type: 'text', text: message.split('\n')[0] || 'failed' }], isError: true };
}

/**
 * Serves MCP on stdin/stdout until stdin ends (the client went away), the transport closes, or
 * SIGINT/SIGTERM. A request line over the transport's limit is answered with a JSON-RPC error and
 * the next line is read as usual.
 */
export async function serveMcp(dataDir: string): Promise<void> {
  const log = (line: string) => void process.stderr.write(`anet mcp: ${line}\n`);
  keepStdoutForProtocol();
  const server = mcpServer(nodeOperations(dataDir, log), log);
  const transport = new LineStdioTransport();
  transport.onrefused = (bytes, id) =>
    log(
      `refused a request of ${bytes} bytes${id !== undefined ? ` (id ${JSON.stringify(id)})` : ''}: over the limit of ${transport.maxLineBytes} bytes; reading on`,
    );
  server.server.onerror = (err) => log(`protocol: ${err.message.split('\n')[0]}`);
  // Whatever ends the session ends the process too, never an unsettled wait (Node's exit code 13).
  const closed = new Promise<void>((resolve) => (server.server.onclose = resolve));
  const ended = untilEnd();
  await server.connect(transport);
  log(`serving ${TOOLS.length} tools on stdio for ${dataDir} (through its daemon when it runs)`);
  await Promise.race([ended, closed]);
  await server.close();
}

/** Anything printed with console.log would corrupt the protocol: send it to stderr instead. */
function keepStdoutForProtocol(): void {
  console.log = console.info = console.debug = (...args: unknown[]) => console.error(...args);
}

function untilEnd(): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      process.off('SIGINT', done);
      process.off('SIGTERM', done);
      process.stdin.off('end', done);
      resolve();
    };
    process.once('SIGINT', done);
    process.once('SIGTERM', done);
    process.stdin.once('end', done);
  });
}

/** The version in package.json (one or two levels up: from src/ under tsx, from dist/src/ when built). */
function packageVersion(): string {
  for (const up of ['../../package.json', '../../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(up, import.meta.url), 'utf8'));
      if (pkg.name === 'anet') return String(pkg.version);
    } catch {
      // not at this level
    }
  }
  return '0.0.0';
}
