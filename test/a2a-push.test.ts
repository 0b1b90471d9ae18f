// Issue 21, A2A v1.0 §3.1.7–3.1.10, §4.3, §13.2 on the local A2A endpoint (SPEC §12): push notification
// configs through the official client (@a2a-js/sdk). Each update of the task is POSTed to the webhook as a
// StreamResponse, in order, with the client's credentials; a failed POST is tried again before the next;
// the webhook is on this machine only (loopback or a Unix socket). Real hub, daemons, a streaming service
// the test steps through, and real webhooks (no sleeps: orderings and counters).
import test, { type ExecutionContext } from 'ava';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory, type Client } from '@a2a-js/sdk/client';
import {
  DeleteTaskPushNotificationConfigRequest,
  GetTaskPushNotificationConfigRequest,
  ListTaskPushNotificationConfigsRequest,
  SendMessageRequest,
  TaskPushNotificationConfig,
  type Task,
} from '@a2a-js/sdk';
import { startNet } from './helpers/net.js';
import { until } from './helpers/wait.js';
import { startSampleService } from '../src/service/sample.js';
import type { Daemon } from '../src/daemon/daemon.js';

const LOCAL = { local: { a2a: '127.0.0.1:0' } };

/** A streaming service the test drives: `say` writes a progress event, `finish` the result. */
function steppedService() {
  let res: ServerResponse | null = null;
  let arrived!: () => void;
  const started = new Promise<void>((resolve) => {
    arrived = resolve;
  });
  return {
    started,
    handler: (_body: unknown, _req: unknown, r: ServerResponse) =>
      new Promise<void>(() => {
        res = r;
        r.writeHead(200, { 'content-type': 'text/event-stream' });
        r.flushHeaders();
        arrived();
      }),
    say: (preview: Record<string, unknown>) => res!.write(`event: progress\ndata: ${JSON.stringify(preview)}\n\n`),
    finish: (result: Record<string, unknown>) => res!.end(`event: result\ndata: ${JSON.stringify(result)}\n\n`),
  };
}

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
  return { net, service, a2a: await client(daemon, token, p.aid) };
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

/** A webhook: what it was POSTed, in order; it answers 500 to the first `failFirst` POSTs. */
async function webhook(t: ExecutionContext, listen: { port: 0 } | { path: string }, failFirst = 0) {
  const posts: { headers: IncomingHttpHeaders; body: Record<string, any> }[] = [];
  const refusedBodies: Record<string, any>[] = [];
  let refused = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (refused < failFirst) {
        refused++;
        refusedBodies.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        res.writeHead(500).end();
        return;
      }
      posts.push({ headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => ('path' in listen ? server.listen(listen.path, resolve) : server.listen(0, '127.0.0.1', resolve)));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const url = 'path' in listen ? `unix://${listen.path}` : `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`;
  return {
    url,
    posts,
    refusedBodies,
    get refused() {
      return refused;
    },
  };
}

/** A POSTed StreamResponse in words: `status WORKING one`, `artifact`, `status COMPLETED`. */
function describe(body: Record<string, any>): string {
  if (body.artifactUpdate) return 'artifact';
  if (body.statusUpdate) {
    const text = (body.statusUpdate.status.message?.parts ?? []).map((p: { text?: string }) => p.text).filter(Boolean);
    return [
      `status ${String(body.statusUpdate.status.state).slice(11)}`,
      ...(body.statusUpdate.status.message?.metadata?.['anet.preview'] ? text : []),
    ].join(' ');
  }
  return Object.keys(body).join(',');
}

const slowCall = (configuration: Record<string, unknown> = {}) =>
  SendMessageRequest.fromJSON({
    message: { messageId: `m-${Math.random()}`, role: 'ROLE_USER', parts: [{ data: { capability: 'demo.slow', args: {} } }] },
    configuration: { returnImmediately: true, ...configuration },
  });

const code = (err: unknown) => (err as { envelopeCode: number }).envelopeCode;

test('A2A §3.1.7–3.1.10, §4.3.3, issue 21: each update is POSTed in order to a loopback webhook with the client’s credentials (Authorization from authentication, X-A2A-Notification-Token from token); a refused POST is tried again before the next; Get, List, Delete (idempotent); a deleted config gets nothing more', async (t) => {
  const { service, a2a } = await setup(t);
  const task = (await a2a.sendMessage(slowCall())) as Task;
  const hook = await webhook(t, { port: 0 }, 1);
  const other = await webhook(t, { port: 0 });
  const created = await a2a.createTaskPushNotificationConfig(
    TaskPushNotificationConfig.fromJSON({
      taskId: task.id,
      url: hook.url,
      token: 'tok-a',
      authentication: { scheme: 'Bearer', credentials: 'cred-a' },
    }),
  );
  t.regex(created.id, /^[0-9a-f]{16}$/, 'an id is given');
  t.like(created, { taskId: task.id, url: hook.url, token: 'tok-a' });
  const second = await a2a.createTaskPushNotificationConfig(
    TaskPushNotificationConfig.fromJSON({ taskId: task.id, id: 'second', url: other.url }),
  );
  t.is(second.id, 'second', "the client's id is kept");

  await service.started;
  service.say({ text: 'one' });
  await until(() => hook.posts.some((p) => describe(p.body) === 'status WORKING one'), 'the preview at the webhook');
  t.is(hook.refused, 1, 'the first POST was refused ...');
  await until(() => other.posts.some((p) => describe(p.body) === 'status WORKING one'), 'the preview at the other webhook');

  const got = await a2a.getTaskPushNotificationConfig(GetTaskPushNotificationConfigRequest.fromJSON({ taskId: task.id, id: created.id }));
  t.deepEqual(got, created);
  const listed = await a2a.listTaskPushNotificationConfig(ListTaskPushNotificationConfigsRequest.fromJSON({ taskId: task.id }));
  t.deepEqual(
    listed.configs.map((c) => c.id),
    [created.id, 'second'],
  );
  await a2a.deleteTaskPushNotificationConfig(DeleteTaskPushNotificationConfigRequest.fromJSON({ taskId: task.id, id: 'second' }));
  await a2a.deleteTaskPushNotificationConfig(DeleteTaskPushNotificationConfigRequest.fromJSON({ taskId: task.id, id: 'second' }));
  const gone = await t.throwsAsync(
    a2a.getTaskPushNotificationConfig(GetTaskPushNotificationConfigRequest.fromJSON({ taskId: task.id, id: 'second' })),
  );
  t.is(code(gone), -32001, 'a config that does not exist is TaskNotFoundError (§3.1.8)');
  const before = other.posts.length;

  service.finish({ ok: true });
  await until(() => hook.posts.some((p) => describe(p.body) === 'status COMPLETED'), 'the final status');
  const seen = hook.posts.map((p) => describe(p.body));
  t.deepEqual(hook.posts[0]!.body, hook.refusedBodies[0], '... and the same update sent again, before any later one');
  t.regex(seen[0]!, /^status (SUBMITTED|WORKING)$/, 'the status as it stood when the config was made comes first');
  t.is(seen.indexOf('status WORKING one'), seen.lastIndexOf('status WORKING one'), 'each update once');
  t.true(seen.indexOf('status WORKING one') < seen.indexOf('artifact'), 'in order');
  t.deepEqual(seen.slice(-2), ['artifact', 'status COMPLETED'], 'the result, then the final state');
  t.like(hook.posts.at(-2)!.body.artifactUpdate, { taskId: task.id, artifact: { parts: [{ data: { ok: true } }] } });
  for (const p of hook.posts) {
    t.like(p.headers, { authorization: 'Bearer cred-a', 'x-a2a-notification-token': 'tok-a', 'content-type': 'application/a2a+json' });
  }
  t.is(other.posts.length, before, 'the deleted config got nothing after its deletion');
});

test('A2A §3.1.7, §13.2, issue 21: a webhook on a Unix socket (unix:///path) given with SendMessage gets the updates; a webhook off this machine is -32602; a config for an unknown task is -32001', async (t) => {
  const { net, service, a2a } = await setup(t);
  const dir = join(net.root, 'hooks');
  await mkdir(dir, { mode: 0o700 });
  const hook = await webhook(t, { path: join(dir, 'hook.sock') });
  const task = (await a2a.sendMessage(slowCall({ taskPushNotificationConfig: { url: hook.url, token: 'tok-u' } }))) as Task;
  await service.started;
  service.say({ text: 'half' });
  await until(() => hook.posts.some((p) => describe(p.body) === 'status WORKING half'), 'the preview at the socket webhook');
  service.finish({ ok: true });
  await until(() => hook.posts.some((p) => describe(p.body) === 'status COMPLETED'), 'the final status');
  t.is(hook.posts[0]!.body.statusUpdate.taskId, task.id);
  t.is(hook.posts[0]!.headers['x-a2a-notification-token'], 'tok-u');
  t.deepEqual(hook.posts.map((p) => describe(p.body)).slice(-2), ['artifact', 'status COMPLETED']);

  for (const url of [
    'http://192.168.1.2/hook',
    'http://example.org/hook',
    'https://10.0.0.1/',
    'file:///etc/passwd',
    'unix://relative.sock',
  ]) {
    const refused = await t.throwsAsync(
      a2a.createTaskPushNotificationConfig(TaskPushNotificationConfig.fromJSON({ taskId: task.id, url })),
    );
    t.is(code(refused), -32602, url);
    t.regex((refused as Error).message, /webhook/, url);
  }
  const sent = await t.throwsAsync(a2a.sendMessage(slowCall({ taskPushNotificationConfig: { url: 'http://192.168.1.2/hook' } })));
  t.is(code(sent), -32602, 'checked before the task is sent');
  const unknown = await t.throwsAsync(
    a2a.createTaskPushNotificationConfig(TaskPushNotificationConfig.fromJSON({ taskId: '00000000000000ff', url: hook.url })),
  );
  t.is(code(unknown), -32001);
});
