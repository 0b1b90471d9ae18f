// Hostile review of issue 21 (streaming end to end: previews, task.cancel of running calls). Real hub and
// daemons (test/helpers/payments.ts `market`), a real service on a Unix socket; peers that misbehave are
// made of the node's own parts (rawPeer) or of the daemon's own messenger. Each test was a bug this review
// found (proven as a failing test first), fixed since.
import test, { type ExecutionContext } from 'ava';
import { until } from '../helpers/wait.js';
import { market, pricedProvider } from '../helpers/payments.js';
import { rawPeer, startNet } from '../helpers/net.js';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { operate, type TaskUpdate } from '../../src/node/operations.js';
import { toBody } from '../../src/protocol/body.js';
import { TASK_CANCEL, TASK_STATUS } from '../../src/protocol/messages.js';
import { MESSAGE_TTL_MS } from '../../src/node/caller/send.js';
import { PREVIEW_PER_SECOND } from '../../src/protocol/preview.js';
import { a2aRpc } from '../helpers/a2a-rpc.js';

/**
 * A service whose calls answer only once the test has ended (`teardown` registers the release); it counts
 * the requests and those the node aborted (a cancel closes the connection).
 */
function slowService(t: ExecutionContext) {
  const seen = { requests: 0, aborted: 0 };
  let release!: () => void;
  const released = new Promise<{ late: true }>((r) => (release = () => r({ late: true })));
  const handler = async (_body: unknown, _req: IncomingMessage, res: ServerResponse) => {
    seen.requests++;
    res.on('close', () => {
      if (!res.writableEnded) seen.aborted++;
    });
    return released;
  };
  return { seen, handler, release, teardown: () => t.teardown(() => release()) };
}

test('PROTOCOL §7.5 (hostile): a cancel right after the payment is not lost — the paid call ends canceled, no service request runs on, the hold is released', async (t) => {
  t.timeout(60_000);
  const slow = slowService(t);
  const { net, p, caller } = await market(t, [{ id: 'slow.job', price: 5 }], {
    handler: slow.handler,
    caller: { payments: { auto_max: 0 } },
    credits: '100',
  });
  slow.teardown(); // first (teardowns run last-in first-out): a held request would keep the service from closing
  const quoted = await operate(caller.node, 'call', { aid: p.aid, capability: 'slow.job', args: '{}', files: [], waitMs: 10_000 });
  t.is(quoted.state, 'input-required');
  // The operator pays (`anet pay` returning at once), then changes their mind (`anet cancel`): the
  // task.cancel reaches the provider while it journals PAY, between taking the quote and opening the
  // call's abort controller (paid-call.ts payCall), where neither cancelQuote nor Cancels knows the task.
  await operate(caller.node, 'pay', { task: quoted.task, waitMs: 0 });
  const after = await operate(caller.node, 'cancel', { task: quoted.task });
  t.is(after.state, 'canceled', `the cancel's answer: ${after.state} (the provider never answered it)`);
  // Canceled before its service ran (the usual case: the hold is still being taken), or while it ran.
  t.is(slow.seen.aborted, slow.seen.requests, 'no service request runs on');
  t.is((await net.hub.ledger.totals()).held, 0n, 'the hold was released');
});

test("PROTOCOL §7.5 (hostile): a task.pay handled after the task.cancel that crossed it is answered with the call's ending and payment-failed (nothing was held)", async (t) => {
  t.timeout(60_000);
  const slow = slowService(t);
  const { p, c, provider, caller } = await market(t, [{ id: 'slow.job', price: 5 }], {
    handler: slow.handler,
    caller: { payments: { auto_max: 0 } },
    credits: '100',
  });
  slow.teardown(); // first (teardowns run last-in first-out): a held request would keep the service from closing
  const quoted = await operate(caller.node, 'call', { aid: p.aid, capability: 'slow.job', args: '{}', files: [], waitMs: 10_000 });
  t.is(quoted.state, 'input-required');
  // The provider's bus runs 32 handlers at once with no order per task, so a caller's task.cancel (the
  // `{task}` body anet cancel sends for a paid, running task) may be handled before the task.pay sent
  // just before it. Made certain here by sending the cancel first, from the caller's own messenger.
  const messenger = await caller.node.network();
  await messenger.send(p.aid, TASK_CANCEL, toBody({ task: quoted.task }), { ttlMs: MESSAGE_TTL_MS });
  await until(
    async () => (await (await provider.node.actors()).state(`call/${c.aid}/${quoted.task}`))?.value === 'canceled',
    'the provider dropped the quote',
    200,
  );
  // The payment that crossed the cancel: the provider finds no quote, and answerAgain says nothing
  // (settled is null for a declined quote), so the caller — which paid — never hears of its task again.
  const paid = await operate(caller.node, 'pay', { task: quoted.task, waitMs: 8_000 });
  t.is(slow.seen.requests, 0, 'nothing ran');
  t.true(['canceled', 'failed'].includes(paid.state), `the paid task is ${paid.state} (${paid.payment?.status}) with no answer coming`);
});

test("PROTOCOL §6.10 (hostile): the caller holds a provider's preview flood to 4 a second — of 200 previews in a burst only a few reach the follower", async (t) => {
  t.timeout(60_000);
  const slow = slowService(t);
  const { net, p, caller } = await market(t, [{ id: 'slow.job' }], { handler: slow.handler });
  slow.teardown(); // first (teardowns run last-in first-out): a held request would keep the service from closing
  const sent = await operate(caller.node, 'call', { aid: p.aid, capability: 'slow.job', args: '{}', files: [], waitMs: 100 });
  await until(() => slow.seen.requests === 1, 'the service has the request', 200);
  const previews: TaskUpdate[] = [];
  const stop = new AbortController();
  t.teardown(() => stop.abort());
  void operate(caller.node, 'watch', {
    task: sent.task,
    waitMs: 30_000,
    signal: stop.signal,
    onUpdate: (u) => {
      if (u.type === 'preview') previews.push(u);
    },
  }).catch(() => {});
  // The provider itself (its identity; a modified node would do the same): previews as fast as it likes.
  const asP = await rawPeer(t, net, 'as-p', { identityOf: p.dir });
  const started = Date.now();
  await Promise.all(
    Array.from({ length: 200 }, (_, i) =>
      asP.messenger.send(
        caller.node.identity.aid,
        TASK_STATUS,
        toBody({ task: sent.task, state: 'working', preview: JSON.stringify({ text: `spam ${i} ${'x'.repeat(8000)}` }) }),
        { ttlMs: 30_000 },
      ),
    ),
  );
  await until(() => previews.length >= 1, 'a preview of the flood reached the follower', 100);
  // The relay delivers the rest over the next moments: what passes is bounded by the time, not the flood.
  await new Promise((r) => setTimeout(r, 2000));
  const seconds = Math.max(1, (Date.now() - started) / 1000);
  t.true(
    previews.length <= Math.ceil(seconds + 1) * PREVIEW_PER_SECOND,
    `${previews.length} previews (${Math.round(previews.length / seconds)} a second, 8 KiB each) reached the follower in ${seconds.toFixed(1)} s`,
  );
});

test("A2A §3.1.10 / issue 21 (hostile): deleting a task's last push config stops following the task", async (t) => {
  t.timeout(60_000);
  const slow = slowService(t);
  const net = await startNet(t);
  const p = await pricedProvider(t, net, [{ id: 'slow.job' }], slow.handler);
  slow.teardown();
  const c = await net.node('c', { local: { a2a: '127.0.0.1:0' } });
  await net.start(p.dir);
  const caller = await net.start(c.dir);
  const hook = createServer((req, res) => req.resume().on('end', () => res.writeHead(200).end()));
  await new Promise<void>((r) => hook.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => new Promise<void>((r) => hook.close(() => r())));
  const rpc = await a2aRpc(caller, c.dir, p.aid);
  const sent = await operate(caller.node, 'call', { aid: p.aid, capability: 'slow.job', args: '{}', files: [], waitMs: 100 });
  await until(() => slow.seen.requests === 1, 'the service has the request', 200);
  t.false(caller.node.caller.following(), 'nobody follows the running task yet');
  const url = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook`;
  const created = await rpc('CreateTaskPushNotificationConfig', { taskId: sent.task, url });
  t.truthy(created.result?.id, JSON.stringify(created));
  t.true(caller.node.caller.following(), 'the config follows its task');
  const deleted = await rpc('DeleteTaskPushNotificationConfig', { taskId: sent.task, id: created.result.id });
  t.is(deleted.error, undefined);
  t.deepEqual((await rpc('ListTaskPushNotificationConfigs', { taskId: sent.task })).result.configs, []);
  await until(() => !caller.node.caller.following(), 'the task no longer followed', 100).catch(() => {});
  t.false(caller.node.caller.following(), 'no config is left, so the task is followed no more');
});
