// Issue 21, SPEC §12: `anet mcp` (the built binary) for agents that call tools side by side, driven by the
// official MCP client over stdio against a real hub, a provider daemon and a real streaming service on a
// Unix socket: calls on one session overlap, a call reports its task's updates and previews as progress
// notifications, and a client's cancellation cancels the task. Each runs through the caller's daemon and
// without one (the node opened inside `anet mcp`).
import test, { type ExecutionContext } from 'ava';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { RequestOptions } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { CallToolResult, Progress } from '@modelcontextprotocol/sdk/types.js';
import { startNet } from './helpers/net.js';
import { BIN, runCli } from './helpers/cli.js';
import { until } from './helpers/wait.js';
import { mint } from './helpers/payments.js';
import { privateSocketDir, streamService, type StreamServiceOptions } from './helpers/stream-service.js';

type Mode = 'through the daemon' | 'in-process';

/** `anet mcp --data DIR` as a child process with an MCP client on its stdio; its stderr is kept. */
async function mcp(t: ExecutionContext, dir: string) {
  const transport = new StdioClientTransport({ command: process.execPath, args: [BIN, 'mcp', '--data', dir], stderr: 'pipe' });
  const stderr: string[] = [];
  transport.stderr!.on('data', (chunk: Buffer) => stderr.push(chunk.toString('utf8')));
  const client = new Client({ name: 'anet-test', version: '1.0.0' });
  await client.connect(transport);
  t.teardown(() => client.close());
  // Listed first, so the client checks each structured content against its tool's output schema.
  await client.listTools();
  const call = async (name: string, args: Record<string, unknown> = {}, options: RequestOptions = {}) =>
    (await client.callTool({ name, arguments: args }, undefined, { timeout: 55_000, ...options })) as CallToolResult;
  return { call, close: () => client.close(), stderr: () => stderr.join('') };
}

/**
 * A provider whose `slow.job` is the streaming service (previews on), a caller `c` with a daemon or not,
 * and an MCP session on c.
 */
async function pair(
  t: ExecutionContext,
  mode: Mode,
  service: StreamServiceOptions,
  opts: { price?: number; credits?: string; caller?: Record<string, unknown> } = {},
) {
  const net = await startNet(t);
  const svc = await streamService(join(await privateSocketDir(t), 'svc.sock'), service);
  t.teardown(() => svc.close());
  const p = await net.node('p', {
    inbound: { policy: 'open', public_capabilities: [{ id: 'slow.job' }] },
    modules: {
      service: { capabilities: [{ id: 'slow.job', url: `unix://${svc.socketPath}`, ...(opts.price ? { price: opts.price } : {}) }] },
      preview: { enabled: true },
    },
  });
  const c = await net.node('c', opts.caller ?? {});
  await net.start(p.dir);
  if (mode === 'through the daemon') await net.start(c.dir);
  if (opts.credits) await mint(net, c.aid, opts.credits);
  return { p, c, svc, ...(await mcp(t, c.dir)) };
}

const overlap = test.macro(async (t, mode: Mode) => {
  // Two progress events a second apart, then the result a second later: about 3 s.
  const { p, svc, call } = await pair(t, mode, { progress: 2, delayMs: 1000, result: { done: true } });
  const order: string[] = [];
  const slow = call('call_capability', { aid: p.aid, capability: 'slow.job' }).then((r) => {
    order.push('slow');
    return r;
  });
  await until(() => svc.requests === 1, 'the service has the slow request', 250);
  // Through the daemon, what the issue saw wait: a get_balance. Without one, list_tasks reads the store of
  // the node the slow call holds open.
  const fast = await call(mode === 'in-process' ? 'list_tasks' : 'get_balance');
  order.push('fast');
  t.falsy(fast.isError, JSON.stringify(fast.content));
  if (mode === 'in-process') {
    const [running] = fast.structuredContent!.tasks as { state: string }[];
    t.true(['submitted', 'working'].includes(running!.state), 'the slow call is listed while it runs');
  }
  const done = await slow;
  t.deepEqual(order, ['fast', 'slow'], 'the fast call answered while the slow one ran');
  t.like(done.structuredContent, { state: 'completed', result: { done: true } });
});

test(
  'issue 21 / SPEC §12: two tool calls on one MCP session overlap: the fast one returns before the slow call_capability (through the daemon)',
  overlap,
  'through the daemon',
);
test(
  'issue 21 / SPEC §12: two tool calls on one MCP session overlap: the fast one returns before the slow call_capability (in-process)',
  overlap,
  'in-process',
);

const progress = test.macro(async (t, mode: Mode) => {
  const { p, call } = await pair(t, mode, { progress: 3, delayMs: 400, result: { done: true } });
  const seen: Progress[] = [];
  const r = await call('call_capability', { aid: p.aid, capability: 'slow.job' }, { onprogress: (x) => void seen.push(x) });
  t.like(r.structuredContent, { state: 'completed', result: { done: true } });
  const messages = seen.map((x) => x.message);
  t.deepEqual(
    messages.filter((m) => m?.startsWith('step')),
    ['step 1', 'step 2', 'step 3'],
    "each preview's text, in order",
  );
  // The task's states, in order. The final one is in the answer; its notification goes just before it, but
  // the SDK's client hands a notification to its callback a microtask late, so one read in the same chunk
  // as the answer arrives after the request is done and is dropped.
  const order = ['submitted', 'working', 'completed'];
  const states = messages.filter((m) => !m?.startsWith('step')).map((m) => order.indexOf(m!));
  t.is(states[0], 0, `the first is the new task: ${messages.join(', ')}`);
  t.true(states.includes(1), 'then it works');
  t.true(
    states.every((s, i) => s >= 0 && (i === 0 || s >= states[i - 1]!)),
    'states only, in order',
  );
  t.true(
    seen.every((x, i) => i === 0 || x.progress > seen[i - 1]!.progress),
    'progress increases',
  );
});

test(
  'issue 21 / SPEC §12: call_capability with a progressToken sends a progress notification for each preview and each change of the task (through the daemon)',
  progress,
  'through the daemon',
);
test(
  'issue 21 / SPEC §12: call_capability with a progressToken sends a progress notification for each preview and each change of the task (in-process)',
  progress,
  'in-process',
);

const cancel = test.macro(async (t, mode: Mode) => {
  // Paid through the daemon (its hold must be released); free in-process (the caller has no account yet).
  const paid = mode === 'through the daemon';
  const { p, svc, call, stderr } = await pair(t, mode, { progress: 1, hangAfter: 1 }, paid ? { price: 5, credits: '100' } : {});
  const abort = new AbortController();
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  const onprogress = (x: Progress) => x.message === 'step 1' && started();
  const pending = call('call_capability', { aid: p.aid, capability: 'slow.job' }, { signal: abort.signal, onprogress });
  await running;
  abort.abort('the agent gave up');
  const abortedAt = Date.now();
  await t.throwsAsync(pending, undefined, 'the client stops waiting at once');
  const taskState = async () => ((await call('list_tasks')).structuredContent!.tasks as { task: string; state: string }[])[0]!;
  await until(async () => (await taskState()).state === 'canceled', 'the task canceled', 250);
  t.true(Date.now() - abortedAt < 10_000, 'canceled at once, not once the call has waited its 50 s');
  const { task } = await taskState();
  t.like((await call('get_task', { task })).structuredContent, { state: 'canceled', reason: 'canceled' });
  await until(() => svc.aborted === 1, 'the service saw its request aborted');
  t.regex(stderr(), new RegExp(`call_capability: the client cancelled its request; task ${task} is now canceled`));
  if (paid) t.like((await call('get_balance')).structuredContent, { balance: '100', held: '0' }, 'the hold was released');
});

test(
  "issue 21 / SPEC §12: a client's cancellation of call_capability cancels the running paid task: the service's request is aborted, the hold released (through the daemon)",
  cancel,
  'through the daemon',
);
test(
  "issue 21 / SPEC §12: a client's cancellation of call_capability cancels the running task and aborts the service's request (in-process)",
  cancel,
  'in-process',
);

test('issue 21 / SPEC §10, §12: pay_task with a progressToken reports the paid call as call_capability does: its previews, then the result', async (t) => {
  // auto_max 0: the quote waits for the operator, here the agent's pay_task.
  const { p, call } = await pair(
    t,
    'through the daemon',
    { progress: 2, delayMs: 300, result: { done: 'paid' } },
    {
      price: 5,
      credits: '100',
      caller: { payments: { auto_max: 0 } },
    },
  );
  const quoted = await call('call_capability', { aid: p.aid, capability: 'slow.job' });
  t.like(quoted.structuredContent, { state: 'input-required', reason: 'payment_required' });
  const seen: Progress[] = [];
  const paid = await call('pay_task', { task: quoted.structuredContent!.task }, { onprogress: (x) => void seen.push(x) });
  t.like(paid.structuredContent, { state: 'completed', result: { done: 'paid' } });
  const messages = seen.map((x) => x.message);
  t.deepEqual(
    messages.filter((m) => m?.startsWith('step')),
    ['step 1', 'step 2'],
    `the previews: ${messages.join(', ')}`,
  );
  t.is((await call('get_balance')).structuredContent!.balance, '95');
});

test('issue 21 / SPEC §12: a session that closes while call_capability runs is no cancellation: the task runs on and is read later', async (t) => {
  const { p, c, svc, call, close, stderr } = await pair(t, 'through the daemon', { progress: 1, hangAfter: 1 });
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  const pending = call(
    'call_capability',
    { aid: p.aid, capability: 'slow.job' },
    { onprogress: (x) => x.message === 'step 1' && started() },
  );
  await running;
  // The SDK aborts every request in flight as its session closes, as it does for a client's cancellation.
  await close();
  await t.throwsAsync(pending);
  await new Promise((r) => setTimeout(r, 500));
  const listed = await runCli(['tasks', '--json', '--data', c.dir]);
  t.like(JSON.parse(listed.stdout), [{ capability: 'slow.job', state: 'working' }]);
  t.is(svc.aborted, 0, "the service's request runs on");
  t.notRegex(stderr(), /cancelled its request/);
});
