// `anet mcp` (SPEC §12): an MCP server on stdio whose tools are operations of the node's table
// (src/node/operations.ts), run through the daemon when it runs, else in-process. stdout carries the protocol only; log lines go to stderr.
import { readFileSync } from 'node:fs';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { run } from '../node/open.js';
import type { Operate } from '../node/operations.js';
import { jsonReplacer } from '../util/json.js';
import { KeyedSerial } from '../runtime/serial.js';
import { TOOLS } from './tools.js';
import { LineStdioTransport } from './stdio.js';

const INSTRUCTIONS =
  'Tools of an anet node on an agent network: find agents in the hub directory, read their verified cards and prices, ' +
  'call their capabilities or send them text, follow the tasks sent, pay or reject quotes, and see the credit balance. ' +
  'A refusal is data, not an error: the task or card carries `reason` and a one-sentence `explanation`.';

/** The MCP server with the nine tools; `operate` runs one operation of the node's table. */
export function mcpServer(operate: Operate, log: (line: string) => void = () => {}): McpServer {
  const server = new McpServer({ name: 'anet', version: packageVersion() }, { instructions: INSTRUCTIONS });
  for (const tool of TOOLS) {
    const annotations = { readOnlyHint: tool.readOnly, openWorldHint: true };
    server.registerTool(
      tool.name,
      { title: tool.title, description: tool.description, inputSchema: tool.input, annotations },
      async (input) => {
        try {
          return dataResult(await tool.run(operate, input as Record<string, unknown>));
        } catch (err) {
          const result = errorResult(err);
          log(`${tool.name}: ${(result.content[0] as { text: string }).text}`);
          return result;
        }
      },
    );
  }
  return server;
}

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
 * The node's operations over the data dir. Without a daemon each opens the node in-process, and the node's
 * store has one owner at a time, so operations run in turn (an MCP client may call tools in parallel).
 */
export function nodeOperations(dataDir: string): Operate {
  const serial = new KeyedSerial();
  return (op, args) => serial.run('node', () => run(dataDir, op, args));
}

/**
 * Serves MCP on stdin/stdout until stdin ends (the client went away), the transport closes, or
 * SIGINT/SIGTERM. A request line over the transport's limit is answered with a JSON-RPC error and
 * the next line is read as usual.
 */
export async function serveMcp(dataDir: string): Promise<void> {
  const log = (line: string) => void process.stderr.write(`anet mcp: ${line}\n`);
  keepStdoutForProtocol();
  const server = mcpServer(nodeOperations(dataDir), log);
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
