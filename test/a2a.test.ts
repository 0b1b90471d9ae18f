// SPEC §12, §6.3, §9, §13: the local A2A endpoint, driven by the official A2A client (@a2a-js/sdk) as
// any standard client would drive it: card resolution at the well-known URL, SendMessage for capability
// calls and text tasks, GetTask, CancelTask (a payment wait), GetExtendedAgentCard with every §6.3 error, the bearer token.
// Real hub, real daemons and real services on loopback in temp dirs.
import test, { type ExecutionContext } from 'ava';
import { mkdir, readFile, stat } from 'node:fs/promises';
import { request } from 'node:http';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory, type Client } from '@a2a-js/sdk/client';
import { SendMessageRequest, GetTaskRequest, CancelTaskRequest, taskStateToJSON, type Task } from '@a2a-js/sdk';
import { startNet, providerConfig, type Net } from './helpers/net.js';
import { runCli } from './helpers/cli.js';
import { until } from './helpers/wait.js';
import { startSampleService, echoHandler } from '../src/service/sample.js';
import { HubClient } from '../src/hub-client/client.js';
import { loadIdentity } from '../src/identity/store.js';
import { parseListen, A2aAddressError } from '../src/a2a/address.js';
import { EXT_PRICE } from '../src/protocol/card/constants.js';
import type { Daemon } from '../src/daemon/daemon.js';

/** Every node in these tests takes a free loopback port for its endpoint. */
const LOCAL = { local: { a2a: '127.0.0.1:0' } };

/** A provider of `demo.echo` (free unless priced) backed by the real sample echo service on a Unix socket. */
async function echoProvider(t: ExecutionContext, net: Net, name: string, price?: number) {
  const run = join(net.root, `run-${name}`);
  await mkdir(run, { mode: 0o700 });
  const service = await startSampleService(join(run, 'svc.sock'), echoHandler);
  t.teardown(() => service.close());
  return net.node(name, {
    inbound: { policy: 'open', public_capabilities: [{ id: 'demo.echo' }] },
    modules: { service: { capabilities: [{ id: 'demo.echo', url: `unix://${service.socketPath}`, ...(price ? { price } : {}) }] } },
    ...LOCAL,
  });
}

/** The caller's daemon, its endpoint and its token. */
async function caller(net: Net, config: Record<string, unknown> = {}) {
  const c = await net.node('c', { ...config, ...LOCAL });
  const daemon = await net.start(c.dir);
  const token = (await readFile(join(c.dir, 'a2a.token'), 'utf8')).trim();
  return { ...c, daemon, token };
}

/** A fetch that sends the bearer token, as a client is configured with it. */
const withToken =
  (token: string): typeof fetch =>
  (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set('authorization', `Bearer ${token}`);
    return fetch(input, { ...init, headers });
  };

/** The official client for one remote agent, from the card at the endpoint's well-known URL. */
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

const sendCall = (capability: string, args: unknown) =>
  SendMessageRequest.fromJSON({ message: { messageId: `m-${Math.random()}`, role: 'ROLE_USER', parts: [{ data: { capability, args } }] } });
const sendText = (text: string) =>
  SendMessageRequest.fromJSON({ message: { messageId: `m-${Math.random()}`, role: 'ROLE_USER', parts: [{ text }] } });

const stateOf = (task: Task) => taskStateToJSON(task.status!.state);

/** The A2A error a client call fails with: its JSON-RPC code and data. */
async function rpcError(t: ExecutionContext, call: Promise<unknown>): Promise<{ code: number; data: Record<string, unknown> | undefined }> {
  const err = (await t.throwsAsync(call)) as unknown as { envelopeCode: number; data?: Record<string, unknown> };
  return { code: err.envelopeCode, data: err.data };
}

/** A raw JSON-RPC POST (A2A-Version 1.0 unless told), for what a well-behaved client never sends. */
async function rawRpc(
  url: string,
  token: string | null,
  body: string,
  version = '1.0',
): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(version ? { 'a2a-version': version } : {}),
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    body,
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

test('SPEC §12: the card at the well-known URL points at this endpoint; a capability call completes with its result and receipt; GetTask; CancelTask of a finished task is -32002', async (t) => {
  const net = await startNet(t);
  const p = await echoProvider(t, net, 'p');
  await net.start(p.dir);
  const c = await caller(net);
  const a2a = await client(c.daemon, c.token, p.aid);

  const card = await (await withToken(c.token)(`${c.daemon.a2a!.agentUrl(p.aid)}.well-known/agent-card.json`)).json();
  t.deepEqual(card.supportedInterfaces, [
    { url: `${c.daemon.a2a!.agentUrl(p.aid)}jsonrpc`, protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' },
  ]);
  t.is(card.signatures, undefined, 'the relay signature does not cover the rewritten card');
  t.deepEqual(
    card.skills.map((s: { id: string }) => s.id),
    ['chat', 'demo.echo'],
  );

  // biome-ignore lint/correctness/noPrecisionLoss: a number past 2^53 on purpose, carried as the JSON double it is
  const sent = (await a2a.sendMessage(sendCall('demo.echo', { text: 'héllo', n: 12345678901234567890 }))) as Task;
  t.is(stateOf(sent), 'TASK_STATE_COMPLETED');
  t.regex(sent.id, /^[0-9a-f]{16}$/);
  t.is(sent.contextId, sent.id);
  const part = sent.artifacts[0]!.parts[0]!.content;
  t.is(part?.$case, 'data');
  t.like((part as { value: { echo: Record<string, unknown> } }).value.echo, { text: 'héllo' });
  t.regex(String(sent.metadata?.['anet.receipt']), /^bafyrei/, "the receipt verified under the provider's KEL");
  t.is(sent.metadata?.['anet.capability'], 'demo.echo');
  // The CLI shows the same task.
  const record = JSON.parse((await runCli(['task', sent.id, '--json', '--data', c.dir])).stdout);
  t.like(record, { state: 'completed', to: p.aid, capability: 'demo.echo' });

  const got = await a2a.getTask(GetTaskRequest.fromJSON({ id: sent.id }));
  t.deepEqual(got, sent, 'GetTask gives the task SendMessage returned');
  t.like(await rpcError(t, a2a.cancelTask(CancelTaskRequest.fromJSON({ id: sent.id }))), { code: -32002, data: { state: 'completed' } });
  t.like(await rpcError(t, a2a.getTask(GetTaskRequest.fromJSON({ id: '00000000000000ff' }))), { code: -32001 });
});

test('SPEC §12, §4, §13: a refused call is a rejected task whose status message carries anet.reason and the explanation', async (t) => {
  const net = await startNet(t);
  const p = await echoProvider(t, net, 'p');
  await net.start(p.dir);
  const c = await caller(net);
  const a2a = await client(c.daemon, c.token, p.aid);
  const bad = (await a2a.sendMessage(sendCall('demo.echo', { $x: 1 }))) as Task;
  t.is(stateOf(bad), 'TASK_STATE_REJECTED');
  t.like(bad.status!.message!.metadata, {
    'anet.reason': 'bad_args',
    explanation: 'The arguments must be a JSON object without top-level keys that start with "$".',
  });
  t.deepEqual(bad.artifacts, []);
  const unknown = (await a2a.sendMessage(sendCall('no.such.thing', {}))) as Task;
  t.is(stateOf(unknown), 'TASK_STATE_REJECTED');
  t.is(unknown.status!.message!.metadata?.['anet.reason'], 'capability_not_public');
});

/** A priced provider (30 credits), a caller with 100 credits and auto_max 10, and its call waiting for payment. */
async function waitingForPayment(t: ExecutionContext) {
  const net = await startNet(t);
  const p = await echoProvider(t, net, 'p', 30);
  await net.start(p.dir);
  const c = await caller(net, { payments: { auto_max: 10 } });
  const hub = await loadIdentity(join(net.root, 'hub'));
  await new HubClient(net.hub.url, hub, () => net.clock.now()).mint(c.aid, '100', randomBytes(16).toString('hex'));
  const a2a = await client(c.daemon, c.token, p.aid);
  const waiting = (await a2a.sendMessage(sendCall('demo.echo', { a: 1 }))) as Task;
  t.is(stateOf(waiting), 'TASK_STATE_INPUT_REQUIRED');
  return { p, c, a2a, waiting };
}

test('SPEC §12, §10: CancelTask of a task waiting for payment rejects the quote: canceled, payment_rejected, nothing paid', async (t) => {
  const { c, a2a, waiting } = await waitingForPayment(t);
  t.like(waiting.status!.message!.metadata, { 'anet.reason': 'payment_required' });
  t.regex(String(waiting.status!.message!.metadata?.['anet.detail']), /auto_max/);
  const canceled = await a2a.cancelTask(CancelTaskRequest.fromJSON({ id: waiting.id }));
  t.is(stateOf(canceled), 'TASK_STATE_CANCELED');
  t.is(canceled.status!.message!.metadata?.['anet.reason'], 'payment_rejected');
  t.like(await rpcError(t, a2a.cancelTask(CancelTaskRequest.fromJSON({ id: waiting.id }))), { code: -32002, data: { state: 'canceled' } });
  t.like(JSON.parse((await runCli(['balance', '--json', '--data', c.dir])).stdout), { balance: '100' });
});

test('SPEC §12, §10 (a2a-x402): a task waiting for payment carries the quote as x402 metadata; a message answering it with payment-submitted pays, and the final task carries the receipts', async (t) => {
  const { p, c, a2a, waiting } = await waitingForPayment(t);
  const meta = waiting.status!.message!.metadata as Record<string, { accepts?: { amount: string; payTo: string }[] } | string>;
  t.is(meta['x402.payment.status'], 'payment-required');
  t.like((meta['x402.payment.required'] as { accepts: unknown[] }).accepts[0], {
    scheme: 'exact',
    asset: 'credit',
    amount: '30',
    payTo: p.aid,
  });
  const answer = (status: string) =>
    SendMessageRequest.fromJSON({
      message: {
        messageId: `m-${Math.random()}`,
        taskId: waiting.id,
        role: 'ROLE_USER',
        parts: [{ text: 'ok' }],
        metadata: { 'x402.payment.status': status },
      },
    });
  const paid = (await a2a.sendMessage(answer('payment-submitted'))) as Task;
  let task = paid;
  await until(async () => {
    task = await a2a.getTask(GetTaskRequest.fromJSON({ id: waiting.id }));
    return stateOf(task) === 'TASK_STATE_COMPLETED';
  }, 'the paid call to end');
  t.is(task.id, waiting.id, 'the same task');
  t.like(task.status!.message!.metadata, { 'x402.payment.status': 'payment-completed' });
  t.like((task.status!.message!.metadata!['x402.payment.receipts'] as unknown[])[0], { success: true, payer: c.aid });
  t.like(JSON.parse((await runCli(['balance', '--json', '--data', c.dir])).stdout), { balance: '70' });
  t.like(
    await rpcError(t, a2a.sendMessage(answer('payment-submitted'))),
    { code: -32602, data: { state: 'completed' } },
    'a task is paid once',
  );
});

test('SPEC §12, §9.2, A2A §3.2.2: a text-only message is a text task; a blocking SendMessage waits for the answer (completed), returnImmediately answers while it waits in the inbox', async (t) => {
  const net = await startNet(t);
  const p = await net.node('p', { inbound: { policy: 'open' }, ...LOCAL });
  await net.start(p.dir);
  const c = await caller(net);
  const a2a = await client(c.daemon, c.token, p.aid);
  const inbox = async () => JSON.parse((await runCli(['inbox', '--json', '--data', p.dir])).stdout) as { task: string }[];

  const atOnce = SendMessageRequest.fromJSON({
    message: { messageId: 'm-first', role: 'ROLE_USER', parts: [{ text: 'first' }] },
    configuration: { returnImmediately: true },
  });
  const quick = (await a2a.sendMessage(atOnce)) as Task;
  t.true(['TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING'].includes(stateOf(quick)), stateOf(quick));
  t.is(quick.metadata?.['anet.capability'], 'chat');

  let answered = false;
  const blocking = (a2a.sendMessage(sendText('please summarise the report')) as Promise<Task>).then((task) => {
    answered = true;
    return task;
  });
  let waiting: { task: string }[] = [];
  await until(async () => {
    waiting = await inbox();
    return waiting.length === 2;
  }, 'both tasks in the inbox');
  t.false(answered, 'not answered while the task waits in the inbox');
  const second = waiting.find((e) => e.task !== quick.id)!.task;
  const replied = await runCli(['reply', second, 'it', 'is', 'fine', '--data', p.dir]);
  t.is(replied.code, 0, replied.stderr);
  const task = await blocking;
  t.is(task.id, second);
  t.is(stateOf(task), 'TASK_STATE_COMPLETED');
  t.deepEqual(task.artifacts[0]!.parts[0]!.content, { $case: 'text', value: 'it is fine' });
});

test("SPEC §6.3, §12: GetExtendedAgentCard gives a priced provider's extended card (verified by the node, served pointing here); -32007 not_applicable for a free one", async (t) => {
  const net = await startNet(t);
  const paid = await net.node('paid', {
    ...providerConfig([{ id: 'text.summarize' }, { id: 'text.translate', price: 3 }], 'open'),
    ...LOCAL,
  });
  const free = await net.node('free', { ...providerConfig([{ id: 'text.summarize' }], 'open'), ...LOCAL });
  await net.start(paid.dir);
  await net.start(free.dir);
  const c = await caller(net);

  const extended = await (await client(c.daemon, c.token, paid.aid)).getAgentCard();
  const prices = extended.capabilities?.extensions.find((e) => e.uri === EXT_PRICE)?.params as { prices: unknown } | undefined;
  t.deepEqual(prices?.prices, [{ skillId: 'text.translate', amount: '3' }]);
  // Served as the public card is: pointing here, with what this endpoint offers (the SDK replaces the card
  // it holds with this one), and without the provider's signature, which covers the card as signed.
  t.is(extended.supportedInterfaces[0]?.url, c.daemon.a2a!.agentUrl(paid.aid).replace(/\/$/, '/jsonrpc'));
  t.like(extended.capabilities, { streaming: true, pushNotifications: true });
  t.is(extended.signatures.length, 0);

  const error = await rpcError(t, (await client(c.daemon, c.token, free.aid)).getAgentCard());
  t.is(error.code, -32007);
  t.like(error.data, { reason: 'not_applicable' });
  t.regex(String(error.data?.explanation), /not contacted/);
});

test('SPEC §6.3 row 4, §12: GetExtendedAgentCard of an offline priced provider is -32603 card_unavailable after the 10 s wait', async (t) => {
  const net = await startNet(t);
  const p = await net.node('p', { ...providerConfig([{ id: 'text.translate', price: 3 }]), ...LOCAL });
  await (await net.start(p.dir)).close(); // its key set stays on the hub; the request is queued, never answered
  const c = await caller(net);
  const a2a = await client(c.daemon, c.token, p.aid);
  const before = net.envelopes();
  const pending = rpcError(t, a2a.getAgentCard());
  await until(() => net.envelopes() - before === 1, 'the card request');
  net.clock.advance(10_000);
  const error = await pending;
  t.is(error.code, -32603);
  t.like(error.data, { reason: 'card_unavailable' });
  t.regex(String(error.data?.explanation), /could not be obtained/);
});

test('SPEC §12: every request needs the bearer token (401); the token file is 0600, 32 random bytes in hex, kept across restarts', async (t) => {
  const net = await startNet(t);
  const p = await echoProvider(t, net, 'p');
  await net.start(p.dir);
  const c = await caller(net);
  const base = c.daemon.a2a!.agentUrl(p.aid);
  const noToken = await fetch(`${base}.well-known/agent-card.json`);
  t.is(noToken.status, 401);
  t.is(noToken.headers.get('www-authenticate'), 'Bearer');
  t.is((await fetch(`${base}.well-known/agent-card.json`, { headers: { authorization: 'Bearer nope' } })).status, 401);
  t.is((await rawRpc(`${base}jsonrpc`, null, '{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}')).status, 401);
  t.is((await fetch(`${c.daemon.a2a!.origin}/elsewhere`)).status, 401, 'even where nothing is served');

  t.regex(c.token, /^[0-9a-f]{64}$/);
  t.is((await stat(join(c.dir, 'a2a.token'))).mode & 0o777, 0o600);
  await c.daemon.close();
  const again = await net.start(c.dir);
  t.is((await readFile(join(c.dir, 'a2a.token'), 'utf8')).trim(), c.token);
  t.is((await withToken(c.token)(`${again.a2a!.agentUrl(p.aid)}.well-known/agent-card.json`)).status, 200);
});

test('SPEC §12: JSON-RPC errors — parse error, invalid request, method not found, invalid params, unknown agents', async (t) => {
  const net = await startNet(t);
  const p = await echoProvider(t, net, 'p');
  await net.start(p.dir);
  const c = await caller(net);
  const url = `${c.daemon.a2a!.agentUrl(p.aid)}jsonrpc`;
  const code = async (body: string) => ((await rawRpc(url, c.token, body)).json.error as { code: number } | undefined)?.code;
  t.is(await code('{nope'), -32700);
  t.is(await code('[]'), -32600);
  t.is(await code('{"jsonrpc":"2.0","method":"GetTask"}'), -32600, 'no id');
  t.is(await code('{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}'), -32601);
  t.is(await code('{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}'), -32602);
  const mixed = { message: { messageId: 'm', role: 'ROLE_USER', parts: [{ text: 'hi' }, { data: { capability: 'demo.echo' } }] } };
  t.is(await code(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'SendMessage', params: mixed })), -32602);
  const byUrl = {
    message: { messageId: 'm', role: 'ROLE_USER', parts: [{ data: { capability: 'demo.echo' } }, { url: 'https://example.org/x' }] },
  };
  t.is(await code(JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'SendMessage', params: byUrl })), -32602);
  const big = await rawRpc(url, c.token, '{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"GetTask","params":{"id":"x"}}');
  t.like(big.json, { id: 1.2345678901234568e29, error: { code: -32001 } });

  const unknown = await withToken(c.token)(`${c.daemon.a2a!.agentUrl('not-an-aid')}.well-known/agent-card.json`);
  t.is(unknown.status, 404, 'not an AID');
  const stranger = await net.node('stranger', LOCAL);
  const missing = await withToken(c.token)(`${c.daemon.a2a!.agentUrl(stranger.aid)}.well-known/agent-card.json`);
  t.is(missing.status, 404);
  t.regex(String(((await missing.json()) as { error: string }).error), /no card/);
});

test('SPEC §12: local.a2a is loopback or a Unix socket only; on a Unix socket (0600) the endpoint answers the same', async (t) => {
  for (const bad of ['0.0.0.0:41811', '192.168.1.2:80', 'example.org:80', 'unix://relative.sock']) {
    t.throws(() => parseListen(bad), { instanceOf: A2aAddressError, message: /is not a loopback address/ }, bad);
  }
  t.deepEqual(parseListen('[::1]:8080'), { kind: 'tcp', host: '::1', port: 8080 });
  const net = await startNet(t);
  const p = await echoProvider(t, net, 'p');
  await net.start(p.dir);
  const sock = join(net.root, 'a2a.sock');
  const c = await net.node('c', { local: { a2a: `unix://${sock}` } });
  const daemon = await net.start(c.dir);
  t.is(daemon.a2a!.origin, 'http://localhost');
  t.is((await stat(sock)).mode & 0o777, 0o600);
  const token = (await readFile(join(c.dir, 'a2a.token'), 'utf8')).trim();
  const card = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = request(
      { socketPath: sock, path: `/a2a/v1/agents/${p.aid}/.well-known/agent-card.json`, headers: { authorization: `Bearer ${token}` } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.on('error', reject);
    req.end();
  });
  t.is(card.status, 200);
  t.is(JSON.parse(card.body).supportedInterfaces[0].url, `http://localhost/a2a/v1/agents/${p.aid}/jsonrpc`);
});
