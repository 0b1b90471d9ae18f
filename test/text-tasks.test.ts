// SPEC §4 rule 3, §9.2: text tasks — accepted from listed peers (or anyone under `open`), answered by the
// local agent at modules.agent.url, or left in the inbox for `anet reply`, across a restart.
import test from 'ava';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startNet, rawPeer } from './helpers/net.js';
import { toBody } from '../src/protocol/body.js';
import { TASK_SEND, TASK_STATUS, TASK_RESULT } from '../src/protocol/messages.js';
import { runCli } from './helpers/cli.js';
import { until } from './helpers/wait.js';
import { startSampleService } from '../src/service/sample.js';

const json = async (args: string[]) => {
  const r = await runCli([...args, '--json']);
  return { ...JSON.parse(r.stdout || '{}'), code: r.code, stderr: r.stderr };
};

test("SPEC §9.2: with a local agent, a text task gets the agent's answer; the agent is told who asked", async (t) => {
  const net = await startNet(t);
  const run = join(net.root, 'run');
  await mkdir(run, { mode: 0o700 });
  let seen: Record<string, unknown> = {};
  const agent = await startSampleService(join(run, 'agent.sock'), (body) => {
    seen = body as Record<string, unknown>;
    return { text: `you said: ${(body as { text: string }).text}` };
  });
  t.teardown(() => agent.close());
  const p = await net.node('p', { inbound: { policy: 'open' }, modules: { agent: { url: `unix://${agent.socketPath}` } } });
  const c = await net.node('c');
  await net.start(p.dir);
  await net.start(c.dir);
  const sent = await runCli(['send', p.aid, 'hello', 'there', '--data', c.dir]);
  t.is(sent.code, 0, sent.stderr);
  t.is(sent.stdout, 'you said: hello there');
  t.like(seen, { from: c.aid, text: 'hello there' });
  t.regex(String(seen.task_id), /^[0-9a-f]{16}$/);
});

test("SPEC §4 rule 3, §9.2: closed policy refuses strangers; a listed peer's task waits in the inbox, across a restart, for anet reply", async (t) => {
  const net = await startNet(t);
  const p = await net.node('p', { inbound: { policy: 'closed' } });
  const c = await net.node('c');
  const s = await net.node('s');
  await writeFile(join(p.dir, 'peers.allow'), `${c.aid}\n`);
  let provider = await net.start(p.dir);
  await net.start(c.dir);
  await net.start(s.dir);
  t.like(await json(['send', p.aid, 'let me in', '--data', s.dir]), { code: 1, state: 'rejected', reason: 'not_accepting' });
  const waiting = await json(['send', p.aid, 'please summarise the report', '--data', c.dir]);
  t.like(waiting, { code: 0, state: 'working', capability: 'chat' });
  const inbox = await json(['inbox', '--data', p.dir]);
  t.like(inbox, { 0: { from: c.aid, text: 'please summarise the report', task: waiting.task } });
  await provider.close();
  provider = await net.start(p.dir);
  const text = await runCli(['inbox', '--data', p.dir]);
  t.regex(text.stdout, new RegExp(`^${waiting.task}  ${c.aid}  please summarise the report$`));
  const replied = await runCli(['reply', waiting.task, 'done:', 'it', 'is', 'fine', '--data', p.dir]);
  t.is(replied.code, 0, replied.stderr);
  t.is(replied.stdout, `answered ${c.aid}`);
  let task: Record<string, unknown> = {};
  await until(async () => {
    task = await json(['task', waiting.task, '--data', c.dir]);
    return task.state === 'completed';
  }, 'the answer at the caller');
  t.like(task, { state: 'completed', result: { text: 'done: it is fine' } });
  t.deepEqual((await json(['inbox', '--data', p.dir]))[0], undefined, 'answered tasks leave the inbox');
  t.is((await runCli(['reply', waiting.task, 'again', '--data', p.dir])).code, 1);
});

test("SPEC §9.2, §13: a text task's id sent again gets working while it waits in the inbox, then the operator's answer, and is never queued twice", async (t) => {
  const net = await startNet(t);
  const p = await net.node('p', { inbound: { policy: 'open' } });
  await net.start(p.dir);
  const x = await rawPeer(t, net, 'x');
  const task = '00000000000000f1';
  const send = (resend?: number) => x.messenger.send(p.aid, TASK_SEND, toBody({ task, text: 'are you there?', resend }));
  await send();
  await until(() => x.received.length >= 1, 'working');
  await send(1);
  await until(() => x.received.length >= 2, 'working again');
  t.deepEqual(
    x.received.map((m) => [m.type, m.body.state]),
    [
      [TASK_STATUS, 'working'],
      [TASK_STATUS, 'working'],
    ],
  );
  const inbox = await json(['inbox', '--data', p.dir]);
  t.like(inbox, { 0: { task } });
  t.is(inbox[1], undefined, 'one inbox entry');
  t.is((await runCli(['reply', task, 'yes', '--data', p.dir])).code, 0);
  await until(() => x.received.length >= 3, 'the answer');
  await send(2);
  await until(() => x.received.length >= 4, 'the answer again');
  const [, , answered, again] = x.received;
  t.like(answered, { type: TASK_RESULT, body: { state: 'completed', result: '{"text":"yes"}' } });
  t.deepEqual(again!.body, answered!.body, 'the kept answer');
});
