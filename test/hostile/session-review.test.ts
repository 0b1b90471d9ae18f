// Hostile review of the session's changes since 12d1ae0: file keys beside the store (outbox-keys/<task>),
// a cancel while a payment is processed, previews held to 4 a second on both sides, push configs bounded,
// slow stream clients cut off at 1 MiB unread, the signals of anet daemon and anet-hub start. Real hub and
// daemons (test/helpers/net.ts), real services on Unix sockets; no mocks. Each test is a defect this
// review found, proven as a failing test first; each is fixed, and its test says what now holds.
import test from 'ava';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startNet } from '../helpers/net.js';
import { pricedProvider } from '../helpers/payments.js';
import { fileProvider } from '../helpers/files.js';
import { png } from '../helpers/png.js';
import { until } from '../helpers/wait.js';
import { operate } from '../../src/node/operations.js';
import { MAX_ENDED_TASKS } from '../../src/a2a/push.js';
import { MAX_RESULT_BYTES } from '../../src/service/call.js';
import { bytesSource, uploadFiles, uploadedArg } from '../../src/node/caller/files.js';
import { resendDelay, RESEND_SILENT_MS } from '../../src/node/caller/resend.js';
import { a2aRpc } from '../helpers/a2a-rpc.js';

const MIB = 1024 * 1024;

/** POSTs a JSON-RPC request to the A2A endpoint; settles with the SSE body read and how the response ended. */
function ssePost(url: string, token: string, body: unknown): Promise<{ text: string; ended: 'end' | 'aborted' }> {
  return new Promise((resolve, reject) => {
    const chunks: string[] = [];
    const req = request(
      url,
      { method: 'POST', headers: { authorization: `Bearer ${token}`, 'a2a-version': '1.0', 'content-type': 'application/json' } },
      (res) => {
        res.setEncoding('utf8');
        res.on('data', (c: string) => chunks.push(c));
        res.on('end', () => resolve({ text: chunks.join(''), ended: 'end' }));
        res.on('aborted', () => resolve({ text: chunks.join(''), ended: 'aborted' }));
        res.on('error', () => resolve({ text: chunks.join(''), ended: 'aborted' }));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

test('A2A §3.1.2, §9.4.2 (hostile): a client reading its stream at once still gets the final status after a result near the 1 MiB result bound (the unread cut-off, util/stream.ts writeUpdate, is well above the largest event)', async (t) => {
  t.timeout(60_000);
  const net = await startNet(t);
  // A result at the provider's bound (MAX_RESULT_BYTES of JSON): the largest artifact event there is (it
  // was cut off when the bound on unread bytes was 1 MiB: just after a write, that write counts as unread).
  const blob = 'x'.repeat(MAX_RESULT_BYTES - '{"blob":""}'.length - 8);
  const p = await pricedProvider(t, net, [{ id: 'big.result' }], () => ({ blob }));
  t.true(Buffer.byteLength(JSON.stringify({ blob })) <= MAX_RESULT_BYTES, 'the result is within the bound');
  t.true(blob.length > MAX_RESULT_BYTES - 32, 'as large as a result can be');
  const c = await net.node('c', { local: { a2a: '127.0.0.1:0' } });
  await net.start(p.dir);
  const caller = await net.start(c.dir);
  const token = (await readFile(join(c.dir, 'a2a.token'), 'utf8')).trim();
  const message = { messageId: 'm1', role: 'ROLE_USER', parts: [{ data: { capability: 'big.result', args: {} } }] };
  const { text, ended } = await ssePost(`${caller.a2a!.agentUrl(p.aid)}jsonrpc`, token, {
    jsonrpc: '2.0',
    id: 1,
    method: 'SendStreamingMessage',
    params: { message },
  });
  const events = text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice('data: '.length));
  t.log(`${events.length} events, ${text.length} bytes; the response ${ended === 'end' ? 'ended' : 'was cut off'}`);
  t.is(ended, 'end', 'the stream ends as streams end, not cut off');
  // Cut off, the client loses the artifact too: the destroyed response drops the bytes it still held.
  t.true(
    events.some((e) => e.includes('"artifactUpdate"')),
    'the result artifact came',
  );
  t.true(
    events.some((e) => e.includes('"statusUpdate"') && e.includes('TASK_STATE_COMPLETED')),
    'the final status event (TASK_STATE_COMPLETED) reached the client',
  );
});

test("PROTOCOL §6.4, SPEC §9.3 (hostile): a call whose outbox-keys file is found damaged after a restart (written without fsync) ends failed, outcome_unknown at its first resend, saying its files' keys are lost — never left submitted", async (t) => {
  t.timeout(60_000);
  const net = await startNet(t);
  const p = await fileProvider(t, net);
  const c = await net.node('c');
  // The provider published its card, then went away for good: the call waits on the caller's resends.
  await (await net.start(p.dir)).close();
  let caller = await net.start(c.dir);
  const [ref] = await uploadFiles(net.hub.url, [{ name: 'k.png', source: bytesSource(png(MIB)) }]);
  const sent = await caller.node.caller.call(p.aid, 'file.sum', '{}', [uploadedArg(ref!)], 100);
  t.is(sent.state, 'submitted');
  const keysDir = join(c.dir, 'outbox-keys');
  t.deepEqual(await readdir(keysDir), [sent.task], "the call's keys wait beside the store");
  // The node stops; its keys file is found damaged at the next start (an empty file is what a power
  // loss leaves of a file written without fsync; any read error — EMFILE, EIO — does the same).
  await caller.close();
  await writeFile(join(keysDir, sent.task), '');
  caller = await net.start(c.dir);
  t.is((await caller.node.caller.task(sent.task))?.state, 'submitted');
  // The first resend is due: it reads the keys back, throws, and its timer is never armed again.
  net.clock.advance(resendDelay(1));
  await new Promise((r) => setTimeout(r, 1000));
  t.log(`resends sent after the restart: ${caller.node.caller.stats.resent}`);
  // The provider stays silent past RESEND_SILENT_MS: the task must end failed, outcome_unknown.
  net.clock.advance(RESEND_SILENT_MS + resendDelay(6));
  await until(async () => (await caller.node.caller.task(sent.task))?.state === 'failed', 'the caller to give up', 250).catch(() => {});
  const after = await caller.node.caller.task(sent.task);
  t.is(after?.state, 'failed', `the task is ${after?.state} with no resend or give-up left to come`);
  t.is(after?.reason, 'outcome_unknown');
  t.regex(after?.detail ?? '', /keys of its files could not be read.*outbox-keys\/[0-9a-f]+ is damaged/);
});

test('A2A §3.1.7, §3.1.8 (hostile): a push config just created is readable (GetTaskPushNotificationConfig) — an ended task counts once toward MAX_ENDED_TASKS, not once per config created on it, so its configs are not forgotten while no other task has ended', async (t) => {
  t.timeout(120_000);
  const net = await startNet(t);
  const p = await pricedProvider(t, net, [{ id: 'demo.echo' }]);
  const c = await net.node('c', { local: { a2a: '127.0.0.1:0' } });
  await net.start(p.dir);
  const caller = await net.start(c.dir);
  let posts = 0;
  // Each follower tells the webhook the result artifact, then the final status: the statuses are counted.
  const hook = createServer((req, res) => {
    const body: Buffer[] = [];
    req.on('data', (b: Buffer) => body.push(b));
    req.on('end', () => {
      if (Buffer.concat(body).includes('"statusUpdate"')) posts++;
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => hook.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => new Promise<void>((r) => hook.close(() => r())));
  const url = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook`;
  const rpc = await a2aRpc(caller, c.dir, p.aid);
  const done = await operate(caller.node, 'call', { aid: p.aid, capability: 'demo.echo', args: '{}', files: [], waitMs: 10_000 });
  t.is(done.state, 'completed');
  // One client sets its one webhook on the ended task again and again (each Create is answered, and the
  // webhook gets the final status each time): no other task ends meanwhile.
  for (let i = 1; i <= MAX_ENDED_TASKS + 1; i++) {
    const created = await rpc('CreateTaskPushNotificationConfig', { taskId: done.task, id: 'hook', url });
    if (created.error) return t.fail(`Create ${i}: ${JSON.stringify(created.error)}`);
    await until(() => posts >= i, `the final status of Create ${i} at the webhook`, 250);
  }
  await new Promise((r) => setTimeout(r, 200));
  const got = await rpc('GetTaskPushNotificationConfig', { taskId: done.task, id: 'hook' });
  t.like(got, { result: { id: 'hook', url } }, `Get right after the last Create: ${JSON.stringify(got.error ?? got.result)}`);
});
