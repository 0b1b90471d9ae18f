// SPEC §12, §6.4, §10, §13: `anet mcp` as a separate process (the built binary), driven by the official
// MCP client over stdio against a real hub and real daemons on loopback: its nine tools, get_agent_card
// equal to `anet card --json`, find, calls with results and refusals as data, paying and rejecting quotes,
// the balance, and real errors as tool errors.
import test, { type ExecutionContext } from 'ava';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult, McpError } from '@modelcontextprotocol/sdk/types.js';
import { startNet, providerConfig, type Net } from './helpers/net.js';
import { BIN, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { until } from './helpers/wait.js';
import { randomBytes } from 'node:crypto';
import { startSampleService, echoHandler } from '../src/service/sample.js';
import { explain } from '../src/protocol/reasons.js';
import { HubClient } from '../src/hub-client/client.js';
import { loadIdentity } from '../src/identity/store.js';

const TOOLS = [
  'call_capability',
  'find_agents',
  'get_agent_card',
  'get_balance',
  'get_task',
  'list_tasks',
  'pay_task',
  'reject_task',
  'send_text',
];

/**
 * `anet mcp --data DIR` as a child process with an MCP client on its stdio; its stderr is kept. The tools
 * are listed first, so the client checks every structured content against its tool's output schema (it
 * throws on a mismatch), and each answer's fields are checked to be exactly the fields the schema names.
 */
async function mcp(t: ExecutionContext, dir: string) {
  const transport = new StdioClientTransport({ command: process.execPath, args: [BIN, 'mcp', '--data', dir], stderr: 'pipe' });
  const stderr: string[] = [];
  transport.stderr!.on('data', (chunk: Buffer) => stderr.push(chunk.toString('utf8')));
  const client = new Client({ name: 'anet-test', version: '1.0.0' });
  const protocolErrors: Error[] = [];
  client.onerror = (err) => void protocolErrors.push(err);
  await client.connect(transport);
  t.teardown(() => client.close());
  const schemas = new Map((await client.listTools()).tools.map((x) => [x.name, x.outputSchema]));
  const call = async (name: string, args: Record<string, unknown> = {}) => {
    const r = (await client.callTool({ name, arguments: args }, undefined, { timeout: 55_000 })) as CallToolResult;
    if (!r.isError) sameFields(t, r.structuredContent!, schemas.get(name), name);
    return { ...r, text: (r.content[0] as { text: string }).text, stderr: stderr.join('') };
  };
  return { client, call, stderr, protocolErrors };
}

type JsonSchema = { properties?: Record<string, JsonSchema>; items?: JsonSchema };

/** An answer has exactly the fields its schema names, and so has each row of a list in it (tasks, agents). */
function sameFields(t: ExecutionContext, data: Record<string, unknown>, schema: JsonSchema | undefined, where: string): void {
  const properties = schema?.properties ?? {};
  t.deepEqual(Object.keys(data).sort(), Object.keys(properties).sort(), `${where}: the fields its outputSchema names`);
  for (const [field, value] of Object.entries(data)) {
    const rows = properties[field]?.items;
    if (!Array.isArray(value) || !rows?.properties) continue;
    for (const row of value) sameFields(t, row as Record<string, unknown>, rows, `${where}.${field}[]`);
  }
}

/** A provider whose capability is served by the sample echo service on a Unix socket. */
async function echoProvider(t: ExecutionContext, net: Net, cap: { id: string; price?: number } = { id: 'demo.echo' }) {
  const run = join(net.root, 'run');
  await mkdir(run, { mode: 0o700 });
  const service = await startSampleService(join(run, 'svc.sock'), echoHandler);
  t.teardown(() => service.close());
  return net.node('p', {
    inbound: { policy: 'open', public_capabilities: [{ id: cap.id }] },
    modules: { service: { capabilities: [{ ...cap, url: `unix://${service.socketPath}` }] } },
  });
}

/** Credits for `aid`, minted by the hub's operator. */
async function mint(net: Net, aid: string, amount: string): Promise<void> {
  const hubIdentity = await loadIdentity(join(net.root, 'hub'));
  await new HubClient(net.hub.url, hubIdentity, () => net.clock.now()).mint(aid, amount, randomBytes(16).toString('hex'));
}

test('SPEC §12, issue 21: anet mcp lists the nine tools, each described, with input and output schemas; its tool list is declared fixed', async (t) => {
  const dir = await tempDir(t);
  const { client, protocolErrors } = await mcp(t, dir);
  const { tools } = await client.listTools();
  t.deepEqual(tools.map((x) => x.name).sort(), TOOLS);
  for (const tool of tools) {
    t.true((tool.description ?? '').length > 20, `${tool.name} is described`);
    t.is(tool.inputSchema.type, 'object');
    for (const [field, schema] of Object.entries(tool.inputSchema.properties ?? {})) {
      t.true(typeof (schema as { description?: string }).description === 'string', `${tool.name}.${field} is described`);
    }
    t.is(tool.outputSchema?.type, 'object', `${tool.name} has an output schema`);
    t.true(Object.keys(tool.outputSchema?.properties ?? {}).length > 0, `${tool.name}'s output schema names its fields`);
  }
  // The list never changes: a client told it might would wait for list_changed notifications for nothing.
  t.deepEqual(client.getServerCapabilities()?.tools, { listChanged: false });
  const byName = new Map(tools.map((x) => [x.name, x]));
  t.deepEqual(byName.get('call_capability')!.inputSchema.required, ['aid', 'capability']);
  t.deepEqual(Object.keys(byName.get('find_agents')!.inputSchema.properties!), ['query', 'skill', 'tag', 'limit']);
  t.deepEqual(byName.get('get_agent_card')!.inputSchema.required, ['aid']);
  t.deepEqual(protocolErrors, [], 'stdout carried the protocol only');
});

test("SPEC §6.4, §12: get_agent_card returns exactly the data of `anet card --json` (a priced provider's extended card)", async (t) => {
  const net = await startNet(t);
  const p = await net.node('p', providerConfig([{ id: 'text.summarize' }, { id: 'text.translate', price: 3 }], 'open'));
  const c = await net.node('c');
  await net.start(p.dir);
  await net.start(c.dir);
  // Both go through c's daemon (its control socket), so its clock stamps the fetch and the cache serves both.
  const { call, client } = await mcp(t, c.dir);
  const r = await call('get_agent_card', { aid: p.aid });
  t.falsy(r.isError, r.text);
  const cli = await runCli(['card', p.aid, '--json', '--data', c.dir]);
  t.is(cli.code, 0, cli.stderr);
  t.deepEqual(r.structuredContent, JSON.parse(cli.stdout));
  t.is(r.text, cli.stdout, 'the text content is what `anet card --json` prints, byte for byte');
  t.like(r.structuredContent, { aid: p.aid, verified: true, key: 'confirmed', charge: 'some skills paid', extended: 'ok', reason: null });
  t.deepEqual(r.structuredContent!.prices, [{ skillId: 'text.translate', amount: '3' }]);
  t.regex(String(r.structuredContent!.explanation), /^Prices are signed by the other side, fetched /);
  t.false('name' in r.structuredContent! || 'skills' in r.structuredContent!);
  // The same data as a resource (issue 21).
  const resource = await client.readResource({ uri: `anet://agents/${p.aid}/card` });
  t.deepEqual(resource.contents, [{ uri: `anet://agents/${p.aid}/card`, mimeType: 'application/json', text: r.text }]);
});

test('SPEC §6.4, §12: find_agents searches the hub like `anet find --json` (no daemon: the node is opened in-process)', async (t) => {
  const net = await startNet(t);
  const p = await net.node('p', providerConfig([{ id: 'text.summarize', description: 'Summarise a text.' }], 'open'));
  const paid = await net.node('paid', providerConfig([{ id: 'text.translate', price: 5 }]));
  const c = await net.node('c');
  await net.start(p.dir);
  await net.start(paid.dir);
  const before = net.envelopes();
  const { call } = await mcp(t, c.dir);
  const found = await call('find_agents', { query: 'summarise' });
  t.falsy(found.isError, found.text);
  const agents = found.structuredContent!.agents as { aid: string; charge: string }[];
  t.deepEqual(
    agents.map((a) => a.aid),
    [p.aid],
  );
  const all = await call('find_agents', {});
  const cli = await runCli(['find', '--json', '--data', c.dir]);
  t.is(cli.code, 0, cli.stderr);
  t.deepEqual(all.structuredContent!.agents, JSON.parse(cli.stdout));
  t.deepEqual((all.structuredContent!.agents as { aid: string }[]).map((a) => a.aid).sort(), [p.aid, paid.aid].sort());
  t.deepEqual((await call('find_agents', { skill: 'text.translate' })).structuredContent!.agents, [
    JSON.parse(cli.stdout).find((a: { aid: string }) => a.aid === paid.aid),
  ]);
  t.is(net.envelopes(), before, 'finding contacts no agent');
});

test('SPEC §9, §12, §13: call_capability returns the result and its verified receipt; a refusal is data with its reason and explanation', async (t) => {
  const net = await startNet(t);
  const p = await echoProvider(t, net);
  const c = await net.node('c');
  await net.start(p.dir);
  await net.start(c.dir);
  const { call } = await mcp(t, c.dir);

  const done = await call('call_capability', { aid: p.aid, capability: 'demo.echo', args: { text: 'héllo', n: 3 } });
  t.falsy(done.isError, done.text);
  t.like(done.structuredContent, {
    state: 'completed',
    capability: 'demo.echo',
    to: p.aid,
    reason: null,
    result: { echo: { text: 'héllo', n: 3 } },
  });
  t.regex(String(done.structuredContent!.receipt), /^bafyrei/, "the receipt verified under the provider's KEL");
  t.deepEqual(JSON.parse(done.text), done.structuredContent);

  const refused = await call('call_capability', { aid: p.aid, capability: 'no.such.thing' });
  t.falsy(refused.isError, 'a refusal is data, not a tool error');
  t.like(refused.structuredContent, { state: 'rejected', reason: 'capability_not_public', explanation: explain('capability_not_public') });

  const text = await call('send_text', { aid: p.aid, text: 'are you there?' });
  t.falsy(text.isError, text.text);
  t.like(text.structuredContent, { state: 'working', capability: 'chat' }, "no local agent: it waits in the provider's inbox");

  const tasks = (await call('list_tasks')).structuredContent!.tasks as { task: string; state: string }[];
  t.deepEqual(
    tasks.map((x) => x.state),
    ['completed', 'rejected', 'working'],
  );
  const cli = JSON.parse((await runCli(['tasks', '--json', '--data', c.dir])).stdout);
  t.deepEqual(tasks, cli);
  const one = await call('get_task', { task: tasks[0]!.task });
  t.deepEqual(one.structuredContent, done.structuredContent);
});

test('issue 21 / SPEC §12: sent tasks are listed and read as resources anet://tasks/<id>, cards read as anet://agents/<AID>/card; an unknown one is -32002', async (t) => {
  const net = await startNet(t);
  const p = await echoProvider(t, net);
  const c = await net.node('c');
  await net.start(p.dir);
  await net.start(c.dir);
  const { call, client } = await mcp(t, c.dir);
  t.deepEqual(client.getServerCapabilities()?.resources, { listChanged: false }, 'no list_changed is ever sent');
  const { resourceTemplates } = await client.listResourceTemplates();
  t.deepEqual(resourceTemplates.map((r) => [r.name, r.uriTemplate, r.mimeType]).sort(), [
    ['agent-card', 'anet://agents/{aid}/card', 'application/json'],
    ['task', 'anet://tasks/{task}', 'application/json'],
  ]);
  t.deepEqual((await client.listResources()).resources, [], 'no task sent yet; agents are not listed');
  const first = await call('call_capability', { aid: p.aid, capability: 'demo.echo', args: { n: 1 } });
  const second = await call('call_capability', { aid: p.aid, capability: 'no.such.thing' });
  const tasks = [first, second].map((r) => r.structuredContent!.task as string);
  const { resources } = await client.listResources();
  t.deepEqual(
    resources.map((r) => r.uri),
    tasks.map((task) => `anet://tasks/${task}`),
    'oldest first, as list_tasks',
  );
  t.regex(resources[0]!.name, /^demo\.echo to bafyrei.*: completed$/);
  const read = await client.readResource({ uri: resources[1]!.uri });
  t.deepEqual(read.contents, [{ uri: resources[1]!.uri, mimeType: 'application/json', text: second.text }], "get_task's data");
  const missing = await t.throwsAsync(client.readResource({ uri: 'anet://tasks/00000000000000ff' }));
  t.is((missing as McpError).code, -32002);
  t.regex(missing!.message, /no task 00000000000000ff/);
  const badAid = await t.throwsAsync(client.readResource({ uri: 'anet://agents/x/card' }));
  t.regex(badAid!.message, /"x" is not a full AID/);
});

test('SPEC §10, §12: a quote above auto_max waits as data; reject_task cancels it, pay_task pays the next; get_balance is `anet balance --json`', async (t) => {
  const net = await startNet(t);
  const p = await echoProvider(t, net, { id: 'img.render', price: 30 });
  const c = await net.node('c', { payments: { auto_max: 10 } });
  await net.start(p.dir);
  await net.start(c.dir);
  await mint(net, c.aid, '100');
  const { call } = await mcp(t, c.dir);

  const first = await call('call_capability', { aid: p.aid, capability: 'img.render', args: { text: 'a cat' } });
  t.falsy(first.isError, first.text);
  t.like(first.structuredContent, {
    state: 'input-required',
    reason: 'payment_required',
    explanation: explain('payment_required'),
    payment: { auto: false },
  });
  const rejected = await call('reject_task', { task: first.structuredContent!.task });
  t.falsy(rejected.isError, rejected.text);
  t.like(rejected.structuredContent, { state: 'canceled', reason: 'payment_rejected', explanation: explain('payment_rejected') });

  const second = await call('call_capability', { aid: p.aid, capability: 'img.render', args: { text: 'a dog' } });
  t.like(second.structuredContent, { state: 'input-required' });
  const paid = await call('pay_task', { task: second.structuredContent!.task });
  t.falsy(paid.isError, paid.text);
  t.like(paid.structuredContent, { state: 'completed', result: { echo: { text: 'a dog' } } });
  t.regex(String(paid.structuredContent!.receipt), /^bafyrei/);

  const balance = await call('get_balance');
  t.falsy(balance.isError, balance.text);
  t.like(balance.structuredContent, { aid: c.aid, balance: '70', held: '0' });
  const cli = await runCli(['balance', '--json', '--data', c.dir]);
  t.is(cli.code, 0, cli.stderr);
  t.deepEqual(balance.structuredContent, JSON.parse(cli.stdout));
  const again = await call('pay_task', { task: second.structuredContent!.task });
  t.true(again.isError, 'a task no longer waiting for payment cannot be paid');
  t.regex(again.text, /not waiting for a payment/);
});

test('SPEC §12: a malformed AID, an unknown task and an unreachable hub are MCP tool errors of one clear line', async (t) => {
  const net = await startNet(t);
  const c = await net.node('c');
  await net.start(c.dir);
  const { call } = await mcp(t, c.dir);
  const bad = await call('get_agent_card', { aid: 'bafyrei-not-an-aid' });
  t.true(bad.isError);
  t.is(bad.text, '"bafyrei-not-an-aid" is not a full AID (bafyrei...), as find_agents returns it');
  const badCall = await call('call_capability', { aid: 'x', capability: 'demo.echo' });
  t.true(badCall.isError);
  t.regex(badCall.text, /is not a full AID/);
  const none = await call('get_task', { task: '00000000000000ff' });
  t.true(none.isError);
  t.is(none.text, 'no task 00000000000000ff');

  // A node whose hub is down (no daemon: the child opens the node itself).
  const port = await closedPort();
  const lone = await net.node('lone');
  await net.configure(lone.dir, { hub: `http://127.0.0.1:${port}` });
  const offline = await mcp(t, lone.dir);
  const r = await offline.call('find_agents', { query: 'x' });
  t.true(r.isError);
  t.regex(r.text, /^cannot reach the hub at http:\/\/127\.0\.0\.1:\d+ .*\(`anet hub start`\)$/);
  t.false(r.text.includes('\n'));
  t.regex(r.stderr, /anet mcp: find_agents: cannot reach the hub/, 'the error is logged on stderr');
});

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

test('SPEC §12: the stdio transport splits lines across and within chunks, and answers a line over its limit by its top-level id, wherever the id stands', async (t) => {
  const { PassThrough } = await import('node:stream');
  const { LineStdioTransport } = await import('../src/mcp/stdio.js');
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const transport = new LineStdioTransport(stdin, stdout, 1000);
  const got: unknown[] = [];
  const refused: unknown[] = [];
  transport.onmessage = (m) => void got.push(m);
  transport.onrefused = (bytes, id) => void refused.push([bytes, id]);
  const out: string[] = [];
  stdout.on('data', (c: Buffer) => out.push(c.toString()));
  await transport.start();
  const ping = (id: number) => JSON.stringify({ jsonrpc: '2.0', id, method: 'ping' });
  const long = (first: boolean) =>
    first
      ? JSON.stringify({ jsonrpc: '2.0', id: 'a"b', method: 'tools/call', params: { id: 1, data: 'A'.repeat(2000) } })
      : JSON.stringify({ method: 'tools/call', params: { id: 1, text: 'x\\"id\\":9'.repeat(300) }, jsonrpc: '2.0', id: 42 });
  const text = `${ping(1)}\n${ping(2)}\r\n${long(true)}\n${ping(3)}\n${long(false)}\n${JSON.stringify({ jsonrpc: '2.0', method: 'n', params: { s: 'y'.repeat(1500) } })}\n${ping(4)}\n`;
  const bytes = Buffer.from(text);
  for (let i = 0; i < bytes.length; i += 7) stdin.write(bytes.subarray(i, i + 7));
  await until(() => got.length === 4 && out.length >= 2, 'the lines read');
  t.deepEqual(
    got.map((m) => (m as { id: number }).id),
    [1, 2, 3, 4],
  );
  t.deepEqual(
    refused.map((r) => (r as unknown[])[1]),
    ['a"b', 42, undefined],
  );
  const answers = out
    .join('')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  t.deepEqual(
    answers.map((a) => a.id),
    ['a"b', 42],
    'a notification over the limit is not answered',
  );
  t.like(answers[0], { error: { code: -32600, data: { limit: 1000 } } });
  t.regex(answers[0].error.message, /^a request of \d+ bytes is over anet mcp's limit of 1000 bytes/);
  await transport.close();
});
