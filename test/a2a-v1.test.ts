// Issue 21, A2A v1.0 on the local A2A endpoint (SPEC §12), through the official client (@a2a-js/sdk):
// ListTasks (§3.1.4: filters, order, cursor pages), A2A-Version negotiation (§3.6.2: 1.0 served, none
// means 0.3, anything else -32009), the v0.3 method names refused with their v1.0 name, the served card's
// capabilities and securitySchemes/securityRequirements (§4.4, §4.5), blocking SendMessage and
// returnImmediately (§3.2.2), the client's contextId (§3.4.1) and messages continuing a task (§3.4.2).
import test, { type ExecutionContext } from 'ava';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory, type Client } from '@a2a-js/sdk/client';
import { GetTaskRequest, ListTasksRequest, SendMessageRequest, taskStateToJSON, type Task } from '@a2a-js/sdk';
import { startNet, providerConfig, type Net } from './helpers/net.js';
import { CARD_REQUEST } from '../src/protocol/messages.js';
import { request } from 'node:http';
import { HEARTBEAT_MS } from '../src/a2a/server.js';
import { until } from './helpers/wait.js';
import { startSampleService, echoHandler, type SampleHandler } from '../src/service/sample.js';
import type { Daemon } from '../src/daemon/daemon.js';

const LOCAL = { local: { a2a: '127.0.0.1:0' } };

/** A provider of `demo.echo` and `demo.slow` (which answers when `release` is called). */
async function provider(t: ExecutionContext, net: Net, name: string) {
  const run = join(net.root, `run-${name}`);
  await mkdir(run, { mode: 0o700 });
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const slow: SampleHandler = async () => {
    await released;
    return { slow: 'done' };
  };
  const echo = await startSampleService(join(run, 'echo.sock'), echoHandler);
  const wait = await startSampleService(join(run, 'slow.sock'), slow);
  t.teardown(async () => {
    release();
    await echo.close();
    await wait.close();
  });
  const p = await net.node(name, {
    inbound: { policy: 'open', public_capabilities: [{ id: 'demo.echo' }, { id: 'demo.slow', per_caller_inflight: 2 }] },
    modules: {
      service: {
        capabilities: [
          { id: 'demo.echo', url: `unix://${echo.socketPath}` },
          { id: 'demo.slow', url: `unix://${wait.socketPath}` },
        ],
      },
    },
    ...LOCAL,
  });
  await net.start(p.dir);
  return { ...p, release };
}

async function caller(net: Net) {
  const c = await net.node('c', LOCAL);
  const daemon = await net.start(c.dir);
  const token = (await readFile(join(c.dir, 'a2a.token'), 'utf8')).trim();
  return { daemon, token };
}

const withToken =
  (token: string): typeof fetch =>
  (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set('authorization', `Bearer ${token}`);
    return fetch(input, { ...init, headers });
  };

function client(daemon: Daemon, token: string, aid: string): Promise<Client> {
  const fetchImpl = withToken(token);
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    }),
  );
  return factory.createFromUrl(daemon.a2a!.agentUrl(aid));
}

/**
 * The official client's JSON-RPC transport alone, to send what the Client would not: another A2A-Version
 * (the Client always sends its own), a method by name (callExtensionMethod, on JsonRpcTransport only).
 */
async function transport(daemon: Daemon, token: string, aid: string) {
  const made = await new JsonRpcTransportFactory({ fetchImpl: withToken(token) }).create(
    `${daemon.a2a!.agentUrl(aid)}jsonrpc`,
    {} as never,
  );
  return made as typeof made & {
    callExtensionMethod(method: string, params: unknown, options: { serviceParameters: Record<string, string> }): Promise<unknown>;
  };
}

const call = (capability: string, args: unknown, extra: { contextId?: string; taskId?: string; configuration?: unknown } = {}) =>
  SendMessageRequest.fromJSON({
    message: {
      messageId: `m-${Math.random()}`,
      role: 'ROLE_USER',
      parts: [{ data: { capability, args } }],
      ...(extra.contextId ? { contextId: extra.contextId } : {}),
      ...(extra.taskId ? { taskId: extra.taskId } : {}),
    },
    ...(extra.configuration ? { configuration: extra.configuration } : {}),
  });

const stateOf = (task: Task) => taskStateToJSON(task.status!.state);
const code = (err: unknown) => (err as { envelopeCode: number }).envelopeCode;

test('A2A §3.1.4, issue 21: ListTasks lists the tasks sent to this agent only, most recently updated first, filtered by contextId, status and statusTimestampAfter, in pages whose token stays good when tasks are added; artifacts only with includeArtifacts; bad parameters are -32602', async (t) => {
  const net = await startNet(t);
  const p = await provider(t, net, 'p');
  const q = await provider(t, net, 'q');
  const c = await caller(net);
  const a2a = await client(c.daemon, c.token, p.aid);
  const sent: Task[] = [];
  for (const [args, contextId] of [[{ n: 1 }, 'ctx-a'], [{ n: 2 }, 'ctx-a'], [{ n: 3 }, 'ctx-b'], [{ n: 4 }], [{ $x: 5 }]] as const) {
    net.clock.advance(1_000);
    sent.push((await a2a.sendMessage(call('demo.echo', args, contextId ? { contextId } : {}))) as Task);
  }
  await (await client(c.daemon, c.token, q.aid)).sendMessage(call('demo.echo', { other: true }));
  const ids = (tasks: Task[]) => tasks.map((task) => task.id);
  const [t1, t2, t3, t4, t5] = sent.map((task) => task.id) as [string, string, string, string, string];
  const list = (params: Record<string, unknown>) => a2a.listTasks(ListTasksRequest.fromJSON(params));

  const all = await list({});
  t.deepEqual(ids(all.tasks), [t5, t4, t3, t2, t1], "this agent's tasks only, newest first");
  t.like(all, { totalSize: 5, pageSize: 50, nextPageToken: '' });
  t.is(all.tasks[4]!.contextId, 'ctx-a', "the client's contextId");
  t.is(all.tasks[1]!.contextId, t4, 'a task sent without one is its own context');
  t.deepEqual(ids((await list({ contextId: 'ctx-a' })).tasks), [t2, t1]);
  t.deepEqual(ids((await list({ status: 'TASK_STATE_REJECTED' })).tasks), [t5]);
  t.deepEqual(ids((await list({ status: 'TASK_STATE_COMPLETED', contextId: 'ctx-a' })).tasks), [t2, t1]);
  const since = sent[2]!.status!.timestamp! as string;
  t.deepEqual(ids((await list({ statusTimestampAfter: since })).tasks), [t5, t4, t3], 'at or after the timestamp');

  const first = await list({ pageSize: 2 });
  t.deepEqual(ids(first.tasks), [t5, t4]);
  t.like(first, { totalSize: 5, pageSize: 2 });
  t.not(first.nextPageToken, '');
  net.clock.advance(1_000);
  const t6 = ((await a2a.sendMessage(call('demo.echo', { n: 6 }))) as Task).id;
  const second = await list({ pageSize: 2, pageToken: first.nextPageToken });
  t.deepEqual(ids(second.tasks), [t3, t2], 'the token goes on where the page ended, a task added since does not shift it');
  const third = await list({ pageSize: 2, pageToken: second.nextPageToken });
  t.deepEqual(ids(third.tasks), [t1]);
  t.is(third.nextPageToken, '', 'the last page');
  t.deepEqual(ids((await list({ pageSize: 1 })).tasks), [t6]);

  // Artifacts are left out entirely unless asked for (the SDK reads a missing field as [], so read the JSON).
  const url = `${c.daemon.a2a!.agentUrl(p.aid)}jsonrpc`;
  const raw = async (params: Record<string, unknown>) => {
    const res = await withToken(c.token)(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'a2a-version': '1.0' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ListTasks', params }),
    });
    return (await res.json()) as { result?: { tasks: Record<string, unknown>[] }; error?: { code: number; message: string } };
  };
  t.false('artifacts' in (await raw({ contextId: 'ctx-b' })).result!.tasks[0]!);
  t.like((await raw({ contextId: 'ctx-b', includeArtifacts: true })).result!.tasks[0], {
    artifacts: [{ parts: [{ data: { echo: { n: 3 } } }] }],
  });
  t.is((await raw({ status: 'TASK_STATE_RUNNING' })).error?.code, -32602);
  t.regex((await raw({ statusTimestampAfter: 'yesterday' })).error!.message, /ISO 8601/);

  for (const bad of [{ pageSize: 150 }, { pageSize: 0 }, { pageToken: 'not-a-token' }, { historyLength: -5 }]) {
    t.is(code(await t.throwsAsync(list(bad))), -32602, JSON.stringify(bad));
  }
});

test('A2A §3.6.2, §3.3.2, issue 21: A2A-Version 1.0 is served (header, query parameter, a patch number ignored); none means 0.3 and is -32009 like any other version, naming the version served; v0.3 method names are refused with their v1.0 name (-32601 under 1.0, -32009 without a version)', async (t) => {
  const net = await startNet(t);
  const p = await provider(t, net, 'p');
  const c = await caller(net);
  const rpc = await transport(c.daemon, c.token, p.aid);
  const getTask = (version: Record<string, string>) =>
    rpc.getTask(GetTaskRequest.fromJSON({ id: '00000000000000ff' }), { serviceParameters: version });

  t.is(code(await t.throwsAsync(getTask({ 'A2A-Version': '1.0' }))), -32001, 'served: the task is looked up');
  t.is(code(await t.throwsAsync(getTask({ 'A2A-Version': '1.0.2' }))), -32001, 'a patch number does not count (§3.6)');
  const versions: Record<string, string>[] = [
    {},
    { 'A2A-Version': '' },
    { 'A2A-Version': '0.3' },
    { 'A2A-Version': '2.0' },
    { 'A2A-Version': '1.1' },
  ];
  for (const version of versions) {
    const err = await t.throwsAsync(getTask(version));
    t.is(code(err), -32009, JSON.stringify(version));
    t.regex((err as Error).message, /serves A2A 1\.0 only: send the header A2A-Version: 1\.0/);
  }
  t.regex((await t.throwsAsync(getTask({}))).message, /no A2A-Version, which means 0\.3/);

  // §3.6.1: the version may be a request parameter instead.
  const res = await withToken(c.token)(`${c.daemon.a2a!.agentUrl(p.aid)}jsonrpc?A2A-Version=1.0`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'GetTask', params: { id: '00000000000000ff' } }),
  });
  t.like(await res.json(), { error: { code: -32001 } });

  const v03 = await t.throwsAsync(rpc.callExtensionMethod('message/send', {}, { serviceParameters: { 'A2A-Version': '1.0' } }));
  t.is(code(v03), -32601);
  t.regex(v03!.message, /message\/send is the A2A v0\.3 name; in A2A 1\.0, served here, it is SendMessage/);
  const v03bare = await t.throwsAsync(rpc.callExtensionMethod('tasks/get', { id: 'x' }, { serviceParameters: {} }));
  t.is(code(v03bare), -32009);
  t.regex(v03bare!.message, /tasks\/get is GetTask in 1\.0/);
});

test('A2A §4.4.3, §4.5, §8.5, issue 21: the served card declares streaming and push notifications and the bearer token as securitySchemes (httpAuthSecurityScheme) with securityRequirements, which the official resolver reads', async (t) => {
  const net = await startNet(t);
  const p = await provider(t, net, 'p');
  const c = await caller(net);
  const base = c.daemon.a2a!.agentUrl(p.aid);
  const card = await (await withToken(c.token)(`${base}.well-known/agent-card.json`)).json();
  t.like(card.capabilities, { streaming: true, pushNotifications: true });
  t.deepEqual(card.securitySchemes, {
    bearer: {
      httpAuthSecurityScheme: {
        scheme: 'Bearer',
        description: 'the token in a2a.token of the node data dir (Authorization: Bearer <token>)',
      },
    },
  });
  t.deepEqual(card.securityRequirements, [{ schemes: { bearer: { list: [] } } }]);

  const read = (await new DefaultAgentCardResolver({ fetchImpl: withToken(c.token) }).resolve(base)) as any;
  t.like(read.securitySchemes.bearer.scheme, { $case: 'httpAuthSecurityScheme', value: { scheme: 'Bearer' } });
  t.deepEqual(read.securityRequirements[0].schemes.bearer.list, []);
  t.true(read.capabilities.streaming && read.capabilities.pushNotifications);
});

test('A2A §3.2.2, §3.4, issue 21: a blocking SendMessage answers once the call has ended, returnImmediately at once; the contextId is kept; a message with a taskId must name a task here (-32001) of the same context (-32602), and one that has ended or is not answering a quote is -32004', async (t) => {
  const net = await startNet(t);
  const p = await provider(t, net, 'p');
  const c = await caller(net);
  const a2a = await client(c.daemon, c.token, p.aid);

  const quick = (await a2a.sendMessage(call('demo.slow', {}, { contextId: 'ctx-q', configuration: { returnImmediately: true } }))) as Task;
  t.true(['TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING'].includes(stateOf(quick)), 'answered while the service still works');
  t.is(quick.contextId, 'ctx-q');
  let answered = false;
  const blocking = (a2a.sendMessage(call('demo.slow', {})) as Promise<Task>).then((task) => {
    answered = true;
    return task;
  });
  await until(async () => (await a2a.listTasks(ListTasksRequest.fromJSON({}))).totalSize === 2, 'the blocking task sent');
  t.false(answered, 'a blocking SendMessage does not answer while the task runs');

  const running = await t.throwsAsync(a2a.sendMessage(call('demo.echo', {}, { taskId: quick.id })));
  t.is(code(running), -32004, 'a running task takes only the answer to its quote');
  const mismatch = await t.throwsAsync(a2a.sendMessage(call('demo.echo', {}, { taskId: quick.id, contextId: 'ctx-other' })));
  t.is(code(mismatch), -32602);
  t.regex(mismatch!.message, /not the context of task/);
  t.is(code(await t.throwsAsync(a2a.sendMessage(call('demo.echo', {}, { taskId: '00000000000000ff' })))), -32001);

  p.release();
  const done = await blocking;
  t.is(stateOf(done), 'TASK_STATE_COMPLETED');
  t.deepEqual(done.artifacts[0]!.parts[0]!.content, { $case: 'data', value: { slow: 'done' } });
  const ended = await t.throwsAsync(a2a.sendMessage(call('demo.echo', {}, { taskId: done.id })));
  t.is(code(ended), -32004);
  t.regex(ended!.message, /is completed: it has ended/);
  await until(
    async () => stateOf(await a2a.getTask(GetTaskRequest.fromJSON({ id: quick.id }))) === 'TASK_STATE_COMPLETED',
    'the first task',
  );
  t.is((await a2a.getTask(GetTaskRequest.fromJSON({ id: quick.id }))).contextId, 'ctx-q', 'GetTask keeps the contextId');
});

test('A2A §3.3.2, SPEC §6.3 row 5, issue 21: GetExtendedAgentCard of an extended card whose signature fails is -32006 (InvalidAgentResponseError) with the reason', async (t) => {
  const net = await startNet(t);
  const m = await net.node('m', { ...providerConfig([{ id: 'text.translate', price: 3 }], 'open'), ...LOCAL });
  const mallory = await net.start(m.dir);
  // The provider's own parts sign a real extended card; this one lowers the price after signing.
  const messenger = await mallory.node.network();
  // biome-ignore lint/complexity/useLiteralKeys: the handler table is private; the test wraps the honest handler
  const honest = messenger['handlers'].get(CARD_REQUEST)!;
  messenger.on(CARD_REQUEST, async (req) => {
    const send = messenger.send.bind(messenger);
    messenger.send = (to, type, body, o) => {
      const b = body as Map<string, unknown>;
      b.set('card', String(b.get('card')).replace('"amount":"3"', '"amount":"1"'));
      return send(to, type, b as never, o);
    };
    try {
      await honest(req);
    } finally {
      messenger.send = send;
    }
  });
  const c = await caller(net);
  const err = await t.throwsAsync((await client(c.daemon, c.token, m.aid)).getAgentCard());
  t.is(code(err), -32006);
  t.like((err as unknown as { data: unknown }).data, { reason: 'card_signature_invalid' });
});

/** POSTs a JSON-RPC request; `headers` settles when the answer's headers came, `chunks` are its body so far. */
function rawPost(url: string, token: string, body: unknown) {
  const chunks: string[] = [];
  let ended!: () => void;
  const done = new Promise<void>((resolve) => {
    ended = resolve;
  });
  const headers = new Promise<Record<string, unknown>>((resolve, reject) => {
    const req = request(
      url,
      { method: 'POST', headers: { authorization: `Bearer ${token}`, 'a2a-version': '1.0', 'content-type': 'application/json' } },
      (res) => {
        resolve(res.headers);
        res.setEncoding('utf8');
        res.on('data', (c: string) => chunks.push(c));
        res.on('end', ended);
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
  return { headers, chunks, done };
}

test('issue 21 (undici waits 300 s for headers and between chunks): a blocking SendMessage still waiting after HEARTBEAT_MS has its headers sent and a space every HEARTBEAT_MS, its JSON after; a quiet stream gets SSE comment lines', async (t) => {
  t.timeout(4 * HEARTBEAT_MS);
  const net = await startNet(t);
  const p = await provider(t, net, 'p');
  const c = await caller(net);
  const url = `${c.daemon.a2a!.agentUrl(p.aid)}jsonrpc`;
  const message = (id: string) => ({ messageId: id, role: 'ROLE_USER', parts: [{ data: { capability: 'demo.slow', args: {} } }] });
  const blocking = rawPost(url, c.token, { jsonrpc: '2.0', id: 1, method: 'SendMessage', params: { message: message('m1') } });
  const streaming = rawPost(url, c.token, { jsonrpc: '2.0', id: 2, method: 'SendStreamingMessage', params: { message: message('m2') } });
  t.is((await blocking.headers)['content-type'], 'application/json', 'the headers came while the call still ran');
  await until(() => blocking.chunks.join('') === ' ', 'the first space', 200);
  await until(() => streaming.chunks.join('').includes(': keep-alive\n\n'), 'a comment on the quiet stream', 200);
  p.release();
  await blocking.done;
  t.like(JSON.parse(blocking.chunks.join('')), { id: 1, result: { task: { status: { state: 'TASK_STATE_COMPLETED' } } } });
  await streaming.done;
  t.regex(streaming.chunks.join(''), /TASK_STATE_COMPLETED/);
});
