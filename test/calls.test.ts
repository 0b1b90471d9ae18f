// SPEC §4, §3, §9, §7: capability calls end to end between real daemons through a real hub relay, to
// real services on Unix sockets: results with verified receipts, refusals with their reasons, the one
// reply for unknown and allow_only ids, calls interrupted by a restart and never run again, and the
// contact credential after a first exchange.
import test, { type ExecutionContext } from 'ava';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { filesContaining } from './helpers/files.js';
import { until } from './helpers/wait.js';
import { startNet, rawPeer, type Net } from './helpers/net.js';
import { runCli } from './helpers/cli.js';
import { startSampleService, echoHandler, type SampleHandler } from '../src/service/sample.js';
import { toBody } from '../src/protocol/body.js';
import { encodeCanonical } from '../src/identity/cbor.js';
import { TASK_SEND, TASK_RESULT, TASK_STATUS } from '../src/protocol/messages.js';
import { pricedProvider } from './helpers/payments.js';

async function provider(
  t: ExecutionContext,
  net: Net,
  handler: SampleHandler,
  caps: Record<string, unknown>[] = [{ id: 'demo.echo' }],
  policy = 'open',
) {
  const run = join(net.root, `run-${Math.random().toString(16).slice(2)}`);
  await mkdir(run, { mode: 0o700 });
  const service = await startSampleService(join(run, 'svc.sock'), handler);
  t.teardown(() => service.close());
  const config = {
    inbound: { policy, public_capabilities: caps },
    modules: { service: { capabilities: caps.map((c) => ({ id: c.id, url: `unix://${service.socketPath}` })) } },
  };
  const p = await net.node(`p-${Math.random().toString(16).slice(2)}`, config);
  return { ...p, service };
}

const call = async (dir: string, aid: string, cap: string, args: string) => {
  const r = await runCli(['call', aid, cap, '--args', args, '--json', '--data', dir]);
  return { ...JSON.parse(r.stdout || '{}'), code: r.code, stderr: r.stderr };
};

test("SPEC §9, §9.4: a call runs on the provider's service and returns its result with a receipt the caller verifies", async (t) => {
  const net = await startNet(t);
  let seen: { caller?: string; body?: unknown } = {};
  const p = await provider(t, net, (body, req) => {
    seen = { caller: String(req.headers['x-anet-caller']), body };
    return echoHandler(body, req, undefined as never);
  });
  const c = await net.node('c');
  await net.start(p.dir);
  await net.start(c.dir);
  const r = await call(c.dir, p.aid, 'demo.echo', '{"text":"héllo","n":12345678901234567890}');
  t.is(r.code, 0, r.stderr);
  t.like(r, { state: 'completed', capability: 'demo.echo', to: p.aid, reason: null });
  t.deepEqual(r.result.echo.text, 'héllo');
  t.regex(r.receipt, /^bafyrei/, "a receipt CID: it verified under the provider's KEL and matches the result");
  t.is(seen.caller, c.aid, "the service is told the caller's AID");
  const text = await runCli(['call', p.aid, 'demo.echo', '--args', '{"a":1}', '--data', c.dir]);
  t.is(text.code, 0);
  t.regex(text.stdout, /"a": 1[\s\S]*receipt bafyrei\S+ \(signed by the provider, verified\)/);
  const tasks = JSON.parse((await runCli(['tasks', '--json', '--data', c.dir])).stdout);
  t.is(tasks.length, 2);
  const one = await runCli(['task', tasks[0].task, '--data', c.dir]);
  t.regex(one.stdout, new RegExp(`^task ${tasks[0].task}: demo.echo on ${p.aid}, completed`));
});

test('SPEC §4, §2.1 allow_only: a stranger calling an allow_only capability gets byte for byte the reply of an unknown id', async (t) => {
  const net = await startNet(t);
  for (const policy of ['open', 'closed']) {
    const p = await provider(t, net, echoHandler, [{ id: 'demo.echo' }, { id: 'secret.tool', allow_only: true }], policy);
    await net.start(p.dir);
    const x = await rawPeer(t, net, `x-${policy}`);
    const send = (task: string, capability: string) => x.messenger.send(p.aid, TASK_SEND, toBody({ task, capability, args: '{}' }));
    await send('00000000000000a1', 'secret.tool');
    await send('00000000000000a2', 'no.such.thing');
    await until(() => x.received.length >= 2, 'two replies');
    const replies = x.received.splice(0).filter((m) => m.type === TASK_RESULT);
    t.is(replies.length, 2);
    const bytes = replies
      .map((m) => Buffer.from(encodeCanonical(new Map([...(m.raw as Map<string, never>)].filter(([k]) => k !== 'task')))))
      .sort(Buffer.compare);
    t.deepEqual(bytes[0], bytes[1], `${policy}: identical replies`);
    t.like(replies[0]!.body, { state: 'rejected', reason: policy === 'open' ? 'capability_not_public' : 'not_accepting' });
  }
});

test('SPEC §4.1, §3.1: refusals and service answers reach the caller with their reasons, and the CLI exits 1', async (t) => {
  const net = await startNet(t);
  const p = await provider(
    t,
    net,
    (body) => {
      if ((body as { fail?: boolean }).fail) throw new Error('bad language code');
      return { ok: true };
    },
    [{ id: 'demo.echo', per_caller_per_min: 2 }],
  );
  const c = await net.node('c');
  await net.start(p.dir);
  await net.start(c.dir);
  t.like(await call(c.dir, p.aid, 'demo.echo', '{"fail":true}'), {
    code: 1,
    state: 'rejected',
    reason: 'service_rejected',
    message: 'bad language code',
  });
  t.like(await call(c.dir, p.aid, 'demo.echo', '{"$x":1}'), { code: 1, state: 'rejected', reason: 'bad_args' });
  t.like(await call(c.dir, p.aid, 'demo.echo', '{}'), { code: 0, state: 'completed' });
  const quota = await call(c.dir, p.aid, 'demo.echo', '{}');
  t.like(quota, { code: 1, state: 'rejected', reason: 'quota_caller_per_min' });
  t.true(quota.retryAfterMs > 0 && quota.retryAfterMs <= 60_000);
  const text = await runCli(['call', p.aid, 'demo.echo', '--args', '{}', '--data', c.dir]);
  t.is(text.code, 1);
  t.regex(text.stdout, /^rejected: quota_caller_per_min \(retry after \d+ s\)\n.+/);
  t.is((await runCli(['call', p.aid, 'demo.echo', '--args', '{nope', '--data', c.dir])).code, 2, 'bad JSON is a usage error');
});

test('SPEC §9.5: a call running when the provider stops ends interrupted after its restart, is never run again, and frees its slot', async (t) => {
  const net = await startNet(t);
  let runs = 0;
  let hang = true;
  const p = await provider(
    t,
    net,
    async () => {
      runs++;
      if (hang) await new Promise(() => {});
      return { ok: true };
    },
    [{ id: 'demo.echo', per_caller_inflight: 1 }],
  );
  const c = await net.node('c');
  let prov = await net.start(p.dir);
  const caller = await net.start(c.dir);
  const pending = caller.node.caller.call(p.aid, 'demo.echo', '{}', [], 60_000);
  await until(() => runs > 0, 'the service to be called', 200);
  t.is(runs, 1);
  await prov.close();
  hang = false;
  prov = await net.start(p.dir);
  const r = await pending;
  t.like(r, { state: 'failed', reason: 'interrupted' });
  t.regex(r.explanation ?? '', /./);
  t.is(runs, 1, 'not run again');
  t.like(await call(c.dir, p.aid, 'demo.echo', '{}'), { state: 'completed' }, "the caller's one in-flight slot was freed");
  t.is(runs, 2);
});

test('SPEC §14, §9.5: the answer leaves only once the outcome is journaled: an outcome that cannot be written is never answered, and the call ends interrupted', async (t) => {
  const net = await startNet(t);
  let runs = 0;
  const p = await provider(t, net, () => {
    runs++;
    return { ok: true };
  });
  const c = await net.node('c');
  let prov = await net.start(p.dir);
  const caller = await net.start(c.dir);
  // Fault injection: the first journal batch after the service ran fails, as a full disk would make it.
  const db = prov.node.store.db as unknown as { _batch: (ops: unknown, o: unknown) => Promise<void> };
  const real = db._batch.bind(db);
  let failed = false;
  db._batch = async (ops, o) => {
    if (!failed && runs > 0 && Array.isArray(ops) && ops.some((op) => String(op.key).startsWith(prov.node.store.journal.prefix))) {
      failed = true;
      throw new Error('simulated write failure');
    }
    return real(ops, o);
  };
  let answered = false;
  const pending = caller.node.caller.call(p.aid, 'demo.echo', '{}', [], 60_000).finally(() => (answered = true));
  await until(() => failed, 'the outcome write to fail', 200);
  // The answer was sealed while the write ran. The call's run ends (and is logged) only after the answer
  // would have been handed to the relay: from then on nothing of this run can leave.
  await until(
    () => net.log(prov).some((l) => / \(demo\.echo\): simulated write failure$/.test(l)),
    'the call to end on the failed write',
    200,
  );
  t.false(answered, 'no answer for an outcome the journal does not hold');
  await prov.close();
  prov = await net.start(p.dir);
  // The caller takes the first final answer: had `completed` left before the restart, it would be this.
  const r = await pending;
  t.like(r, { state: 'failed', reason: 'interrupted' });
  t.is(runs, 1, 'not run again');
});

test('SPEC §4.1: twenty calls running at once all complete, and the daemon prints no listener-leak warning', async (t) => {
  const net = await startNet(t);
  const warnings: string[] = [];
  const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
  process.on('warning', onWarning);
  t.teardown(() => void process.off('warning', onWarning));
  // The service holds every call until all twenty run at once.
  let running = 0;
  let release!: () => void;
  const all = new Promise<void>((r) => (release = r));
  const p = await provider(
    t,
    net,
    async (body) => {
      if (++running === 20) release();
      await all;
      return { echo: body };
    },
    [{ id: 'demo.echo', max_inflight: 32, per_caller_inflight: 32 }],
  );
  const c = await net.node('c');
  await net.start(p.dir);
  const caller = await net.start(c.dir);
  const results = await Promise.all(
    Array.from({ length: 20 }, (_, i) => caller.node.caller.call(p.aid, 'demo.echo', JSON.stringify({ i }), [], 60_000)),
  );
  t.deepEqual(
    results.map((r) => r.state),
    Array(20).fill('completed'),
  );
  t.is(running, 20);
  t.deepEqual(
    warnings.filter((w) => w.includes('MaxListeners')),
    [],
  );
});

test("SPEC §7, §6.1: after a first exchange a listed caller holds a contact credential, so a free provider's extended card is fetched", async (t) => {
  const net = await startNet(t);
  const p = await provider(t, net, echoHandler, [{ id: 'demo.echo' }, { id: 'secret.tool', allow_only: true }], 'closed');
  const c = await net.node('c');
  await writeFile(join(p.dir, 'peers.trust'), `${c.aid}\n`);
  await net.start(p.dir);
  const reader = await net.start(c.dir);
  const before = JSON.parse((await runCli(['card', p.aid, '--json', '--data', c.dir])).stdout);
  t.is(before.extended, 'not_applicable', 'free and no credential yet: not contacted');
  t.like(await call(c.dir, p.aid, 'secret.tool', '{}'), { state: 'completed' }, 'a listed caller may call allow_only');
  t.true(await reader.node.fetcher.credentialFrom(p.aid));
  const after = JSON.parse((await runCli(['card', p.aid, '--json', '--data', c.dir])).stdout);
  t.is(after.extended, 'ok');
  t.deepEqual(
    after.card.skills.map((s: { id: string }) => s.id),
    ['demo.echo', 'secret.tool'],
  );
});

test("SPEC §9.3: with discard, no byte of the arguments, files or result is left in the provider's data dir after a restart", async (t) => {
  const net = await startNet(t);
  const files = { media_types: ['image/*'] };
  const p = await provider(t, net, (body) => ({ echo: body }), [
    { id: 'keep.echo', files },
    { id: 'secret.echo', discard: true, files },
  ]);
  const c = await net.node('c');
  let prov = await net.start(p.dir);
  await net.start(c.dir);
  const png = (marker: string) => Buffer.concat([Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex'), Buffer.from(`FILE-${marker}`)]);
  const withFile = async (cap: string, marker: string) => {
    const path = join(net.root, `${marker}.png`);
    await writeFile(path, png(marker));
    const r = await runCli([
      'call',
      p.aid,
      cap,
      '--args',
      JSON.stringify({ text: `ARGS-${marker}` }),
      '--file',
      path,
      '--json',
      '--data',
      c.dir,
    ]);
    t.is(r.code, 0, r.stderr);
    return JSON.parse(r.stdout);
  };
  const kept = await withFile('keep.echo', 'KEEPMARK-4417');
  const secret = await withFile('secret.echo', 'DISCARD-9083');
  t.is(secret.result.echo.args.text, 'ARGS-DISCARD-9083', 'the service got the arguments');
  t.is(Buffer.from(secret.result.echo.files[0].data_b64, 'base64').toString('latin1').slice(-17), 'FILE-DISCARD-9083');
  t.is(secret.result.echo.files[0].mime, 'image/png', 'the type the node detected');
  t.truthy(kept.receipt);
  await prov.close();
  prov = await net.start(p.dir);
  await prov.close();
  t.deepEqual(await filesContaining(p.dir, 'DISCARD-9083'), [], 'nothing of the discarded call: args, file or result');
  // The search finds such bytes: the call without discard keeps its arguments and result for the operator.
  t.not((await filesContaining(p.dir, 'ARGS-KEEPMARK-4417')).length, 0);
});

test('SPEC §12: a long call shows its progress on stderr while stdout keeps the result', async (t) => {
  const net = await startNet(t);
  // The service answers once the command has shown progress: the call is long for as long as that takes.
  let shown!: () => void;
  const progressShown = new Promise<void>((r) => (shown = r));
  const p = await provider(t, net, async () => {
    await progressShown;
    return { slow: true };
  });
  t.teardown(() => shown()); // a call still held would keep the service from closing
  const c = await net.node('c');
  await net.start(p.dir);
  await net.start(c.dir);
  const r = await runCli(
    ['call', p.aid, 'demo.echo', '--args', '{}', '--data', c.dir],
    (line) => /: working \(\d+ s\)$/.test(line) && shown(),
  );
  t.is(r.code, 0, r.stderr);
  t.regex(r.stderr, /^task [0-9a-f]{16}: working \(\d+ s\)$/m);
  t.regex(r.stdout, /^\{\n {2}"slow": true\n\}\nreceipt bafyrei/);
});

test('SPEC §9.5: a resend of a running task changes nothing, and the call still ends interrupted after a restart', async (t) => {
  const net = await startNet(t);
  let runs = 0;
  // The service never answers while the test runs; at its end it lets go, so the service can close.
  let hangUp!: () => void;
  const hung = new Promise<void>((r) => (hangUp = r));
  const p = await provider(t, net, async () => {
    runs++;
    await hung;
  });
  t.teardown(() => hangUp());
  let prov = await net.start(p.dir);
  const x = await rawPeer(t, net, 'x');
  const send = () => x.messenger.send(p.aid, TASK_SEND, toBody({ task: '00000000000000b1', capability: 'demo.echo', args: '{}' }));
  await send();
  await until(() => runs > 0, 'the service to be called', 200);
  // The run tells the caller it is working (after 500 ms); then it sends nothing more while it runs, so
  // the next message is the answer to the resend, and a second run would have begun before it.
  await until(() => x.received.length >= 1, 'working from the run', 200);
  t.like(x.received[0], { type: TASK_STATUS, body: { task: '00000000000000b1', state: 'working' } });
  await send(); // the same task id again, while it runs
  await until(() => x.received.length >= 2, 'the answer to the resend', 200);
  t.like(x.received[1], { type: TASK_STATUS, body: { task: '00000000000000b1', state: 'working' } }, 'answered, not admitted again');
  t.is(runs, 1, 'never run twice');
  await prov.close();
  prov = await net.start(p.dir);
  await until(() => x.received.some((m) => m.type === TASK_RESULT), 'the interrupted result', 200);
  t.like(x.received.find((m) => m.type === TASK_RESULT)?.body, { task: '00000000000000b1', state: 'failed', reason: 'interrupted' });
});

test('SPEC §11: renaming a running node (hub-register) keeps its encryption keys on the hub: peers still reach it', async (t) => {
  const net = await startNet(t);
  const p = await provider(t, net, echoHandler);
  const c = await net.node('c');
  await net.start(p.dir);
  await net.start(c.dir);
  t.like(await call(c.dir, p.aid, 'demo.echo', '{"n":1}'), { state: 'completed' });
  const renamed = await runCli(['hub-register', '--name', 'renamed', '--data', p.dir]);
  t.is(renamed.code, 0, renamed.stderr);
  // A peer that never reached it before must fetch its key set from the hub now.
  const c2 = await net.node('c2');
  await net.start(c2.dir);
  t.like(await call(c2.dir, p.aid, 'demo.echo', '{"n":2}'), { state: 'completed', result: { echo: { n: 2 } } });
});

test('SPEC §9.1, §13: a task that cannot be sent at all (the peer has no encryption keys) fails the command and is recorded failed, not_delivered — never left submitted', async (t) => {
  const net = await startNet(t);
  const c = await net.node('c');
  await net.start(c.dir);
  const silent = await rawPeer(t, net, 'silent', { connect: false });
  const r = await runCli(['call', silent.aid, 'demo.echo', '--args', '{}', '--data', c.dir]);
  t.is(r.code, 1);
  t.regex(r.stderr, /encryption keys/);
  const [task] = JSON.parse((await runCli(['tasks', '--json', '--data', c.dir])).stdout);
  t.like(task, { to: silent.aid, state: 'failed', reason: 'not_delivered' });
  t.regex(task.detail, /encryption keys/);
});

test("SPEC §9, §9.4, §13: a task id sent again is answered from the journal — the same result and receipt bytes, a refusal with its reason — takes no quota, and a discard call's lost result is interrupted", async (t) => {
  const net = await startNet(t);
  let runs = 0;
  const p = await provider(
    t,
    net,
    (body) => {
      runs++;
      return { echo: body };
    },
    [
      { id: 'keep.echo', per_caller_per_min: 2 },
      { id: 'secret.echo', discard: true },
    ],
  );
  await net.start(p.dir);
  const x = await rawPeer(t, net, 'x');
  const send = (task: string, capability: string, resend?: number, args: string | null = '{"n":1}') =>
    x.messenger.send(p.aid, TASK_SEND, toBody({ task, capability, args: args ?? undefined, resend }));
  const answers = async (task: string, n: number) => {
    await until(
      () => x.received.filter((m) => m.body.task === task && m.type === TASK_RESULT).length >= n,
      `${n} answer(s) to ${task}`,
      250,
    );
    return x.received.filter((m) => m.body.task === task && m.type === TASK_RESULT).map((m) => m.body);
  };
  await send('00000000000000c1', 'keep.echo');
  const [first] = await answers('00000000000000c1', 1);
  t.like(first, { state: 'completed', result: '{"echo":{"n":1}}' });
  t.true(first!.receipt instanceof Uint8Array);
  // Three marked resends and one unmarked duplicate: the same final answer each time, nothing run again.
  for (const n of [1, 2, 3, undefined]) await send('00000000000000c1', 'keep.echo', n);
  const again = await answers('00000000000000c1', 5);
  for (const a of again) {
    t.is(a.result, first!.result);
    t.deepEqual(Buffer.from(a.receipt as Uint8Array), Buffer.from(first!.receipt as Uint8Array), 'the receipt it was answered with');
  }
  t.is(runs, 1, 'never run again');
  // The window allows two calls a minute: had the repeats counted, this one would be refused.
  await send('00000000000000c2', 'keep.echo');
  t.like((await answers('00000000000000c2', 1))[0], { state: 'completed' });
  await send('00000000000000c3', 'keep.echo');
  const [refused] = await answers('00000000000000c3', 1);
  t.like(refused, { state: 'rejected', reason: 'quota_caller_per_min' });
  await send('00000000000000c3', 'keep.echo', 1);
  const [, refusedAgain] = await answers('00000000000000c3', 2);
  t.like(refusedAgain, { state: 'rejected', reason: 'quota_caller_per_min' });
  t.true((refusedAgain!.retry_after_ms as number) <= (refused!.retry_after_ms as number), 'the wait counts from the refusal');
  // A status poll (a resend without arguments) for a task never seen has nothing to run.
  await send('00000000000000c4', 'keep.echo', 1, null);
  // discard: the result is not kept, so a repeat can only say the outcome was lost.
  await send('00000000000000d1', 'secret.echo');
  t.like((await answers('00000000000000d1', 1))[0], { state: 'completed' });
  await send('00000000000000d1', 'secret.echo', 1);
  const [, lost] = await answers('00000000000000d1', 2);
  t.like(lost, { state: 'failed', reason: 'interrupted' });
  t.regex(String(lost!.detail), /discard/);
  t.is(runs, 3);
  t.false(
    x.received.some((m) => m.body.task === '00000000000000c4'),
    'no answer to a poll for an unknown task',
  );
});

test('SPEC §9, §10, §13: a priced call whose quote was lost gets the same signed quote when its task id comes again', async (t) => {
  const net = await startNet(t);
  const p = await pricedProvider(t, net, [{ id: 'text.translate', price: 3 }]);
  await net.start(p.dir);
  const x = await rawPeer(t, net, 'x');
  const send = (resend?: number) =>
    x.messenger.send(p.aid, TASK_SEND, toBody({ task: '00000000000000e1', capability: 'text.translate', args: '{}', resend }));
  await send();
  await until(() => x.received.length >= 1, 'the quote');
  await send(1);
  await until(() => x.received.length >= 2, 'the quote again');
  const [one, two] = x.received.map((m) => m.body);
  t.like(one, { state: 'input-required', reason: 'payment_required', 'x402.payment.status': 'payment-required' });
  t.is(two!['x402.payment.required'], one!['x402.payment.required'], 'the same quote id and amount');
  t.is(two!['anet.quote.signature'], one!['anet.quote.signature']);
  t.is(p.ran(), 0);
});
