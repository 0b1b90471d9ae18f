// Issue 21, A2A v1.0 §3.1.2, §3.1.5, §3.1.6, §9.4.2, §9.4.6 on the local A2A endpoint (SPEC §12): streams
// and cancels, driven by the official client (@a2a-js/sdk): SendStreamingMessage gives the Task, status
// updates (the provider's previews as working messages), the result artifact and the final status, then
// ends; SubscribeToTask after a dropped connection gets the task as it stands and the rest; CancelTask
// stops a running call. Real hub, daemons and a streaming service the test steps through (no sleeps).
import test, { type ExecutionContext } from 'ava';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ServerResponse } from 'node:http';
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory, type Client } from '@a2a-js/sdk/client';
import { CancelTaskRequest, SendMessageRequest, SubscribeToTaskRequest, taskStateToJSON, type StreamResponse } from '@a2a-js/sdk';
import { startNet } from './helpers/net.js';
import { until } from './helpers/wait.js';
import { startSampleService } from '../src/service/sample.js';
import { randomBytes } from 'node:crypto';
import { HubClient } from '../src/hub-client/client.js';
import { loadIdentity } from '../src/identity/store.js';
import type { Daemon } from '../src/daemon/daemon.js';

const LOCAL = { local: { a2a: '127.0.0.1:0' } };

/** A streaming service the test drives: each `say` writes a progress event, `finish` the result; `aborted` when the node hung up. */
function steppedService() {
  let res: ServerResponse | null = null;
  let arrived!: () => void;
  const started = new Promise<void>((resolve) => {
    arrived = resolve;
  });
  let hungUp!: () => void;
  const aborted = new Promise<void>((resolve) => {
    hungUp = resolve;
  });
  return {
    started,
    /** Settles when the node closed the request before the answer ended. */
    aborted,
    handler: (_body: unknown, _req: unknown, r: ServerResponse) =>
      new Promise<void>(() => {
        res = r;
        r.on('close', () => {
          if (!r.writableFinished) hungUp();
        });
        r.writeHead(200, { 'content-type': 'text/event-stream' });
        r.flushHeaders();
        arrived();
      }),
    say: (preview: Record<string, unknown>) => res!.write(`event: progress\ndata: ${JSON.stringify(preview)}\n\n`),
    finish: (result: Record<string, unknown>) => res!.end(`event: result\ndata: ${JSON.stringify(result)}\n\n`),
  };
}

/** A provider of `demo.slow` (previews on) backed by a stepped service, and a caller's client for it. */
async function setup(t: ExecutionContext) {
  const net = await startNet(t);
  const service = steppedService();
  const run = join(net.root, 'run-p');
  await mkdir(run, { mode: 0o700 });
  const sample = await startSampleService(join(run, 'svc.sock'), service.handler);
  t.teardown(() => {
    sample.server.closeAllConnections();
    return sample.close();
  });
  const p = await net.node('p', {
    inbound: { policy: 'open', public_capabilities: [{ id: 'demo.slow' }] },
    modules: { service: { capabilities: [{ id: 'demo.slow', url: `unix://${sample.socketPath}` }] }, preview: { enabled: true } },
    ...LOCAL,
  });
  await net.start(p.dir);
  const c = await net.node('c', LOCAL);
  const daemon = await net.start(c.dir);
  const token = (await readFile(join(c.dir, 'a2a.token'), 'utf8')).trim();
  return { net, p, service, daemon, a2a: await client(daemon, token, p.aid) };
}

function client(daemon: Daemon, token: string, aid: string): Promise<Client> {
  const fetchImpl: typeof fetch = (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set('authorization', `Bearer ${token}`);
    return fetch(input, { ...init, headers });
  };
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    }),
  );
  return factory.createFromUrl(daemon.a2a!.agentUrl(aid));
}

const slowCall = () =>
  SendMessageRequest.fromJSON({
    message: {
      messageId: `m-${Math.random()}`,
      role: 'ROLE_USER',
      contextId: 'ctx-1',
      parts: [{ data: { capability: 'demo.slow', args: {} } }],
    },
  });

/** Reads a stream in the background: its events so far, and whether (and how) it ended. */
function collect(stream: AsyncGenerator<StreamResponse>) {
  const events: StreamResponse[] = [];
  const out = { events, ended: false, error: null as Error | null, done: null as unknown as Promise<void> };
  out.done = (async () => {
    try {
      for await (const e of stream) events.push(e);
    } catch (err) {
      out.error = err as Error;
    }
    out.ended = true;
  })();
  return out;
}

/** An event in words: `task SUBMITTED`, `status WORKING "step one"`, `artifact`, ... */
function describe(e: StreamResponse): string {
  const p = e.payload!;
  if (p.$case === 'task') return `task ${taskStateToJSON(p.value.status!.state).slice(11)}`;
  if (p.$case === 'artifactUpdate') return 'artifact';
  if (p.$case === 'statusUpdate') {
    const parts = (p.value.status!.message?.parts ?? []).map((part) =>
      part.content?.$case === 'text'
        ? JSON.stringify(part.content.value)
        : part.content?.$case === 'data'
          ? JSON.stringify(part.content.value)
          : '',
    );
    return [`status ${taskStateToJSON(p.value.status!.state).slice(11)}`, ...parts].join(' ');
  }
  return p.$case;
}

const hasEvent = (s: { events: StreamResponse[] }, text: string) => s.events.map(describe).some((d) => d.includes(text));

test('A2A §3.1.2, §9.4.2, issue 21: SendStreamingMessage streams the Task, the previews as working status updates (text and data parts), the result artifact and the final status, then the stream ends', async (t) => {
  const { service, a2a } = await setup(t);
  const stream = collect(a2a.sendMessageStream(slowCall()));
  await service.started;
  service.say({ text: 'reading' });
  await until(() => hasEvent(stream, '"reading"'), 'the first preview');
  service.say({ data: { percent: 50 } });
  await until(() => hasEvent(stream, '{"percent":50}'), 'the second preview');
  t.false(stream.ended, 'open while the task runs');
  service.finish({ draft: 'done' });
  await stream.done;
  t.is(stream.error, null);

  const seen = stream.events.map(describe);
  t.is(seen[0], 'task SUBMITTED', 'the stream begins with the Task');
  t.true(seen.includes('status WORKING "reading"'));
  t.true(seen.includes('status WORKING {"percent":50}'), 'a data-only preview is a data part');
  t.deepEqual(seen.slice(-2), ['artifact', 'status COMPLETED'], 'the result, then the final state, then the end');
  const artifact = stream.events.at(-2)!.payload as {
    value: { taskId: string; contextId: string; artifact: { parts: { content: unknown }[] } };
  };
  t.deepEqual(artifact.value.artifact.parts[0]!.content, { $case: 'data', value: { draft: 'done' } });
  t.is(artifact.value.contextId, 'ctx-1', "the client's contextId is kept");
  const first = stream.events[0]!.payload as { value: { id: string; contextId: string } };
  t.is(first.value.contextId, 'ctx-1');
  t.is(artifact.value.taskId, first.value.id);
  const preview = stream.events.find((e) => describe(e) === 'status WORKING "reading"')!.payload as {
    value: { status: { message: { metadata: Record<string, unknown> } } };
  };
  t.like(preview.value.status.message.metadata, { 'anet.preview': true });
});

test('A2A §3.1.6, §9.4.6, issue 21: after a dropped SSE connection, SubscribeToTask gets the task as it stands, then the rest until the final status; an ended task cannot be subscribed to (-32004), an unknown one is -32001', async (t) => {
  const { service, a2a, daemon } = await setup(t);
  const drop = new AbortController();
  const first = collect(a2a.sendMessageStream(slowCall(), { signal: drop.signal }));
  await service.started;
  service.say({ text: 'one' });
  await until(() => hasEvent(first, '"one"'), 'the first preview');
  const id = (first.events[0]!.payload as { value: { id: string } }).value.id;
  t.true(daemon.node.caller.following());
  drop.abort();
  await first.done;
  t.truthy(first.error, 'the first stream was cut');
  // The daemon stops following the task for the stream that went (the task goes on).
  await until(() => !daemon.node.caller.following(), 'nobody follows the task once the stream has gone');

  const again = collect(a2a.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id })));
  await until(() => again.events.length > 0, 'the current task');
  t.regex(describe(again.events[0]!), /^task (SUBMITTED|WORKING)$/, 'the task as it stands comes first');
  service.say({ text: 'two' });
  await until(() => hasEvent(again, '"two"'), 'the preview after the drop');
  service.finish({ ok: true });
  await again.done;
  t.is(again.error, null);
  t.deepEqual(again.events.map(describe).slice(-2), ['artifact', 'status COMPLETED']);

  const ended = await t.throwsAsync(async () => {
    for await (const _ of a2a.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id }))) {
      // never reached: the task has ended
    }
  });
  t.like(ended as unknown as { envelopeCode: number; data: unknown }, { envelopeCode: -32004, data: { state: 'completed' } });
  const unknown = await t.throwsAsync(async () => {
    for await (const _ of a2a.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id: '00000000000000ff' }))) {
      // never reached
    }
  });
  t.is((unknown as unknown as { envelopeCode: number }).envelopeCode, -32001);
});

test('A2A §3.1.5, issue 21: CancelTask of a running call stops it — the service sees its request aborted, the answer is the canceled task, an open stream ends with the canceled status; canceling it again is -32002 naming the state', async (t) => {
  const { service, a2a } = await setup(t);
  const stream = collect(a2a.sendMessageStream(slowCall()));
  await service.started;
  service.say({ text: 'busy' });
  await until(() => hasEvent(stream, '"busy"'), 'the task under way');
  const id = (stream.events[0]!.payload as { value: { id: string } }).value.id;

  const canceled = await a2a.cancelTask(CancelTaskRequest.fromJSON({ id }));
  t.is(taskStateToJSON(canceled.status!.state), 'TASK_STATE_CANCELED');
  await service.aborted; // the service saw its request aborted
  await stream.done;
  t.regex(stream.events.map(describe).at(-1)!, /^status CANCELED "The caller canceled the task/, 'the stream ends with the final state');
  t.false(stream.events.map(describe).includes('artifact'));

  const again = await t.throwsAsync(a2a.cancelTask(CancelTaskRequest.fromJSON({ id })));
  t.like(again as unknown as { envelopeCode: number; data: unknown }, { envelopeCode: -32002, data: { state: 'canceled' } });
  t.regex((again as Error).message, /is canceled/);
});

test('A2A §3.1.2, §3.2.2, SPEC §10, issue 21: a priced call left to the client ends its stream at input-required with the quote; after the client pays (SendMessage with x402.payment.status), SubscribeToTask follows it to the result', async (t) => {
  const net = await startNet(t);
  const service = steppedService();
  const run = join(net.root, 'run-p');
  await mkdir(run, { mode: 0o700 });
  const sample = await startSampleService(join(run, 'svc.sock'), service.handler);
  t.teardown(() => {
    sample.server.closeAllConnections();
    return sample.close();
  });
  const p = await net.node('p', {
    inbound: { policy: 'open', public_capabilities: [{ id: 'demo.slow' }] },
    modules: { service: { capabilities: [{ id: 'demo.slow', url: `unix://${sample.socketPath}`, price: 30 }] } },
    ...LOCAL,
  });
  await net.start(p.dir);
  const c = await net.node('c', { payments: { auto_max: 10 }, ...LOCAL });
  const daemon = await net.start(c.dir);
  const hub = await loadIdentity(join(net.root, 'hub'));
  await new HubClient(net.hub.url, hub, () => net.clock.now()).mint(c.aid, '100', randomBytes(16).toString('hex'));
  const a2a = await client(daemon, (await readFile(join(c.dir, 'a2a.token'), 'utf8')).trim(), p.aid);

  const quoted = collect(a2a.sendMessageStream(slowCall()));
  await quoted.done;
  t.is(quoted.error, null);
  t.is(quoted.events.map(describe).at(-1)?.split(' ')[1], 'INPUT_REQUIRED', 'the stream ends where the task waits for the client');
  const last = quoted.events.at(-1)!.payload as { value: { taskId: string; status: { message: { metadata: Record<string, unknown> } } } };
  t.like(last.value.status.message.metadata, { 'x402.payment.status': 'payment-required' });
  const id = last.value.taskId;

  const paid = await a2a.sendMessage(
    SendMessageRequest.fromJSON({
      message: {
        messageId: 'm-2',
        role: 'ROLE_USER',
        taskId: id,
        parts: [{ text: 'pay' }],
        metadata: { 'x402.payment.status': 'payment-submitted' },
      },
      configuration: { returnImmediately: true },
    }),
  );
  t.is((paid as { id: string }).id, id);
  const rest = collect(a2a.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id })));
  await service.started;
  await until(() => rest.events.length > 0, 'the task as it stands');
  t.regex(describe(rest.events[0]!), /^task /);
  service.finish({ ok: true });
  await rest.done;
  t.is(rest.error, null);
  t.deepEqual(
    rest.events
      .map(describe)
      .slice(-2)
      .map((d) => d.split(' ').slice(0, 2).join(' ')),
    ['artifact', 'status COMPLETED'],
  );
});
