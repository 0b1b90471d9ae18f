// SPEC §12 (control socket), §6.3: the daemon's control socket serves exactly the node's table of
// operations (src/node/operations.ts), so the CLI and MCP get through a running daemon what the node
// computes in-process — on a real hub and real daemons on loopback, in temporary directories.
import test from 'ava';
import { startNet, providerConfig } from './helpers/net.js';
import { request } from 'node:http';
import { askDaemon, run, ControlError, controlPath, NDJSON } from '../src/node/open.js';
import { until } from './helpers/wait.js';
import { OP_NAMES, operate, type ArgsOf, type OpName, type ResultOf, type TaskUpdate } from '../src/node/operations.js';
import type { Node } from '../src/node/node.js';

type Cases = { [K in OpName]?: ArgsOf<K> };
const UNKNOWN_TASK = 'feedfeedfeedfeed';

/** Operations that only read (or, for `publish`, repeat what the daemon did at start); `aid` is the provider's. */
const reads = (aid: string): Cases => ({
  ping: {},
  status: {},
  publish: {},
  find: { q: 'summarize' },
  card: { aid },
  'public-card': { aid },
  tasks: {},
  task: { id: UNKNOWN_TASK },
  inbox: {},
  'audit-cards': {},
  'audit-prices': { aid },
  balance: {},
});

/** Operations on a task this node does not have: each is refused. */
const refusals: Cases = {
  pay: { task: UNKNOWN_TASK, waitMs: 0 },
  reject: { task: UNKNOWN_TASK },
  reply: { task: UNKNOWN_TASK, text: 'hello' },
  watch: { task: UNKNOWN_TASK, waitMs: 0 },
  cancel: { task: UNKNOWN_TASK },
};

/** Sent to peers: test/mcp.test.ts and test/a2a.test.ts run them through the socket and the endpoint. */
const SENDS: OpName[] = ['call', 'send'];

/** `status` tells the time it is read (uptime, the journal's bytes on disk): the rest must be equal. */
function timeless(op: OpName, value: unknown): unknown {
  if (op !== 'status' || !value) return value;
  const { uptimeMs: _u, startedAt: _s, journal, ...rest } = value as ResultOf<'status'>;
  return { ...rest, journal: { ...journal, bytes: 0 } };
}

test('SPEC §12: the cases here and the sends cover every operation of the table', (t) => {
  t.deepEqual([...Object.keys(reads('')), ...Object.keys(refusals), ...SENDS].sort(), [...OP_NAMES].sort());
});

test("SPEC §12: each read of the table answers through the daemon's control socket exactly as on its node in-process", async (t) => {
  const net = await startNet(t);
  const p = await net.node('p', providerConfig([{ id: 'text.summarize' }], 'open'));
  const c = await net.node('c');
  await net.start(p.dir);
  const daemon = await net.start(c.dir);
  for (const [op, args] of Object.entries(reads(p.aid)) as [OpName, ArgsOf<OpName>][]) {
    // Once first, so what a first read keeps (the card seen, the KEL) is there for both answers.
    await operate(daemon.node, op, args);
    const remote = await askDaemon(c.dir, op, args);
    t.deepEqual(timeless(op, remote), timeless(op, await operate(daemon.node, op, args)), op);
  }
  t.like(await askDaemon(c.dir, 'card', { aid: p.aid }), { aid: p.aid, verified: true, extended: 'not_applicable' });
});

test('SPEC §12: a refusal reads the same through the socket as in-process; a name outside the table is refused', async (t) => {
  const net = await startNet(t);
  const c = await net.node('c');
  const daemon = await net.start(c.dir);
  for (const [op, args] of Object.entries(refusals) as [OpName, ArgsOf<OpName>][]) {
    const local = await operate(daemon.node, op, args).then(
      () => null,
      (err: Error) => err.message,
    );
    t.truthy(local, `${op} refuses a task it does not have`);
    const remote = await t.throwsAsync(askDaemon(c.dir, op, args), { instanceOf: ControlError });
    t.is(remote.message, local!, op);
  }
  const unknown = await t.throwsAsync(askDaemon(c.dir, 'dispatch' as OpName, {}), { instanceOf: ControlError });
  t.is(unknown.message, 'unknown control operation "dispatch"');
  t.true(OP_NAMES.includes('card') && !OP_NAMES.includes('dispatch' as OpName));
});

test('SPEC §12: arguments from the socket are checked: a wrong field is refused in one line naming it, a call without files has none', async (t) => {
  const net = await startNet(t);
  const p = await net.node('p', providerConfig([{ id: 'demo.echo' }], 'open'));
  const c = await net.node('c');
  await net.start(p.dir);
  await net.start(c.dir);
  // A hand-written client's JSON, not the typed `run`: the socket is where untyped arguments come in.
  const wrong = await t.throwsAsync(askDaemon(c.dir, 'card', { aid: 5 } as never), { instanceOf: ControlError });
  t.regex(wrong.message, /^bad arguments for "card": aid: /);
  const missing = await t.throwsAsync(askDaemon(c.dir, 'send', { aid: p.aid, waitMs: 0 } as never), { instanceOf: ControlError });
  t.regex(missing.message, /^bad arguments for "send": text: /);
  const args = { aid: p.aid, capability: 'demo.echo', args: '{"text":"hi"}', waitMs: 20_000 };
  // No service runs behind demo.echo here: the provider's own answer shows the call was sent, with no files.
  const done = await askDaemon(c.dir, 'call', args as never);
  t.like(done, { capability: 'demo.echo', state: 'failed', reason: 'service_unavailable' }, JSON.stringify(done));
});

test('SPEC §12 / issue 21: a call followed through the socket streams each update of its task as it happens, then the answer', async (t) => {
  const net = await startNet(t);
  const p = await net.node('p', providerConfig([{ id: 'demo.echo' }], 'open'));
  const c = await net.node('c');
  await net.start(p.dir);
  await net.start(c.dir);
  const updates: TaskUpdate[] = [];
  const args = { aid: p.aid, capability: 'demo.echo', args: '{}', files: [], waitMs: 20_000, onUpdate: (u: TaskUpdate) => updates.push(u) };
  const done = await askDaemon(c.dir, 'call', args);
  t.like(done, { state: 'failed', reason: 'service_unavailable' });
  const states = updates.map((u) => (u.type === 'record' ? u.record.state : u.type));
  t.is(states[0], 'submitted', 'the record as sent comes first');
  t.is(states.at(-1), 'failed', 'the final record is streamed before the answer');
  t.true(updates.every((u) => u.type === 'record' && u.record.task === done!.task));
  // Following the ended task gives its record at once.
  const watched: TaskUpdate[] = [];
  const again = await askDaemon(c.dir, 'watch', { task: done!.task, waitMs: 5_000, onUpdate: (u) => watched.push(u) });
  t.deepEqual(again, done);
  t.deepEqual(watched, [{ type: 'record', record: done }]);
});

test('SPEC §12 / issue 21: a follower that hangs up on the control socket is followed no more; its task goes on', async (t) => {
  const net = await startNet(t);
  const p = await net.node('p', providerConfig([{ id: 'demo.echo' }], 'open'));
  const c = await net.node('c');
  await net.start(p.dir);
  const daemon = await net.start(c.dir);
  // A text task with no agent behind it waits in the provider's inbox: it stays `working`.
  const sent = await askDaemon(c.dir, 'send', { aid: p.aid, text: 'hello', waitMs: 10_000 });
  t.is(sent!.state, 'working');
  const first = await new Promise<string>((resolve, reject) => {
    const req = request(
      { socketPath: controlPath(c.dir), path: '/watch', method: 'POST', headers: { accept: NDJSON, 'content-type': 'application/json' } },
      (res) => {
        res.setEncoding('utf8');
        res.once('data', (line: string) => {
          resolve(line);
          req.destroy();
        });
      },
    );
    req.on('error', (err: NodeJS.ErrnoException) => err.code === 'ECONNRESET' || reject(err));
    req.end(JSON.stringify({ task: sent!.task, waitMs: 600_000 }));
  });
  t.like(JSON.parse(first), { update: { type: 'record', record: { task: sent!.task, state: 'working' } } });
  await until(() => !daemon.node.caller.following(), 'the watch to end when its client has gone');
  t.like(await askDaemon(c.dir, 'task', { id: sent!.task }), { state: 'working' });
});

test("SPEC §12: without a daemon, run opens the data dir's node in-process and gives the daemon's answer", async (t) => {
  const net = await startNet(t);
  const c = await net.node('c');
  const daemon = await net.start(c.dir);
  const through = await run(c.dir, 'ping', {});
  await daemon.close();
  t.is(await askDaemon(c.dir, 'ping', {}), undefined, 'no daemon listens any more');
  t.deepEqual(await run(c.dir, 'ping', {}), through);
  t.deepEqual(await run(c.dir, 'inbox', {}), []);
});

/** Never run: `tsc --noEmit -p .` (which covers test/) checks that the table types each operation's arguments and result. */
function typedAtCompileTime(node: Node): void {
  // @ts-expect-error: `card` takes the AID
  void operate(node, 'card', {});
  // @ts-expect-error: `card` takes no text
  void operate(node, 'card', { aid: 'x', text: 'y' });
  // @ts-expect-error: not an operation of the table
  void operate(node, 'dispatch', {});
  void operate(node, 'card', { aid: 'x' }).then((view) => {
    const verified: boolean = view.verified;
    // @ts-expect-error: a card view is not a task record
    void view.state;
    return verified;
  });
}
void typedAtCompileTime;
