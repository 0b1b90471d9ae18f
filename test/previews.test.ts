// Issue 21, the anet-preview extension (SPEC §5.2, PROTOCOL §6.10): a service that answers with
// `text/event-stream` sends progress before its result; a provider with `modules.preview.enabled` passes
// it on to the caller as `task.status` previews (at most 4 a second per task, kept nowhere), and the
// caller shows them in `anet call` and to whoever follows the task. Real daemons, hub and services.
import test, { type ExecutionContext } from 'ava';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import { mkdir } from 'node:fs/promises';
import { startSampleService } from '../src/service/sample.js';
import { startNet } from './helpers/net.js';
import { pricedProvider } from './helpers/payments.js';
import { runCli } from './helpers/cli.js';
import { filesContaining } from './helpers/files.js';
import { operate, type TaskUpdate } from '../src/node/operations.js';
import { EXT_PREVIEW } from '../src/protocol/card/constants.js';

/** Writes `progress` events `gapMs` apart, then the result: what a streaming service answers. */
function streaming(progress: { text?: string; data?: Record<string, unknown> }[], gapMs: number, result: Record<string, unknown>) {
  return async (_body: unknown, _req: IncomingMessage, res: ServerResponse) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const p of progress) {
      res.write(`event: progress\ndata: ${JSON.stringify(p)}\n\n`);
      if (gapMs) await sleep(gapMs);
    }
    res.end(`event: result\ndata: ${JSON.stringify(result)}\n\n`);
  };
}

async function pair(t: ExecutionContext, handler: ReturnType<typeof streaming>, opts: { preview?: boolean; discard?: boolean } = {}) {
  const net = await startNet(t);
  const p = await pricedProvider(t, net, [{ id: 'text.draft' }], handler);
  const config = p.config as { inbound: { public_capabilities: Record<string, unknown>[] }; modules: Record<string, unknown> };
  if (opts.discard) config.inbound.public_capabilities = [{ id: 'text.draft', discard: true }];
  await net.configure(p.dir, { ...config, modules: { ...config.modules, preview: { enabled: opts.preview ?? true } } });
  const c = await net.node('c');
  const provider = await net.start(p.dir);
  const caller = await net.start(c.dir);
  return { net, p, c, provider, caller };
}

const previewsOf = (updates: TaskUpdate[]) => updates.flatMap((u) => (u.type === 'preview' ? [u.preview] : []));

test('issue 21 / SPEC §5.2: previews of a streaming service reach the caller before the result, in order, and anet call shows them on stderr', async (t) => {
  const steps = [{ text: 'reading the text' }, { text: 'drafting', data: { percent: 50 } }, { text: 'polishing', data: { percent: 90 } }];
  const { p, c, caller } = await pair(t, streaming(steps, 300, { draft: 'done' }));
  const updates: TaskUpdate[] = [];
  const r = await operate(caller.node, 'call', {
    aid: p.aid,
    capability: 'text.draft',
    args: '{}',
    files: [],
    waitMs: 20_000,
    onUpdate: (u) => updates.push(u),
  });
  t.like(r, { state: 'completed', result: { draft: 'done' } });
  t.regex(r.receipt!, /^bafyrei/, 'the result (only it) is covered by the receipt');
  t.deepEqual(previewsOf(updates), steps, 'each preview, in order (300 ms apart: none coalesced)');
  const last = updates.map((u) => u.type).lastIndexOf('preview');
  t.true(
    updates.slice(last).some((u) => u.type === 'record' && u.record.state === 'completed'),
    'the final record comes after them',
  );
  // Through the daemon, as a user runs it.
  const cli = await runCli(['call', p.aid, 'text.draft', '--data', c.dir]);
  t.is(cli.code, 0, cli.stderr);
  t.regex(cli.stdout, /"draft": "done"/);
  for (const s of steps) t.regex(cli.stderr, new RegExp(`: ${s.text} \\(\\d+ s\\)`));
});

test('issue 21 / SPEC §5.2: a burst of progress reaches the caller at most 4 times a second, the last of the burst last', async (t) => {
  const burst = Array.from({ length: 40 }, (_, i) => ({ text: `step ${i}` }));
  // 40 events within ~200 ms, then the result 600 ms later so the burst's last preview is sent.
  const events = async (_b: unknown, _r: IncomingMessage, res: ServerResponse) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const p of burst) {
      res.write(`event: progress\ndata: ${JSON.stringify(p)}\n\n`);
      await sleep(5);
    }
    await sleep(600);
    res.end('event: result\ndata: {"ok":true}\n\n');
  };
  const { p, caller } = await pair(t, events);
  const updates: TaskUpdate[] = [];
  const r = await operate(caller.node, 'call', {
    aid: p.aid,
    capability: 'text.draft',
    args: '{}',
    files: [],
    waitMs: 20_000,
    onUpdate: (u) => updates.push(u),
  });
  t.is(r.state, 'completed');
  const seen = updates.flatMap((u) => (u.type === 'preview' ? [u] : []));
  t.true(seen.length >= 2 && seen.length <= 4, `${seen.length} previews of 40 events sent over about 0.8 s`);
  t.is(seen[0]!.preview.text, 'step 0', 'the first goes at once');
  t.is(seen.at(-1)!.preview.text, 'step 39', 'the last of the burst is the last one sent');
});

test('issue 21 / SPEC §5.2: without modules.preview.enabled progress is dropped, the result still comes, and the card does not carry anet-preview', async (t) => {
  const { p, caller } = await pair(t, streaming([{ text: 'working on it' }], 50, { ok: 1 }), { preview: false });
  const updates: TaskUpdate[] = [];
  const r = await operate(caller.node, 'call', {
    aid: p.aid,
    capability: 'text.draft',
    args: '{}',
    files: [],
    waitMs: 20_000,
    onUpdate: (u) => updates.push(u),
  });
  t.like(r, { state: 'completed', result: { ok: 1 } });
  t.deepEqual(previewsOf(updates), []);
  const card = await operate(caller.node, 'public-card', { aid: p.aid });
  const extensions = (card.card as { capabilities: { extensions: { uri: string }[] } }).capabilities.extensions.map((e) => e.uri);
  t.false(extensions.includes(EXT_PREVIEW));
});

test('issue 21 / SPEC §9.3: a discard capability keeps no preview anywhere: the marker in its progress is in no data dir', async (t) => {
  const MARKER = 'PREVIEW-MARKER-7f3a9c';
  const { net, p, c, caller, provider } = await pair(t, streaming([{ text: MARKER }], 300, { ok: true }), { discard: true });
  const updates: TaskUpdate[] = [];
  const r = await operate(caller.node, 'call', {
    aid: p.aid,
    capability: 'text.draft',
    args: '{}',
    files: [],
    waitMs: 20_000,
    onUpdate: (u) => updates.push(u),
  });
  t.is(r.state, 'completed');
  t.deepEqual(previewsOf(updates), [{ text: MARKER }], 'the caller saw it live');
  const card = await operate(caller.node, 'public-card', { aid: p.aid });
  t.true((card.card as { capabilities: { extensions: { uri: string }[] } }).capabilities.extensions.some((e) => e.uri === EXT_PREVIEW));
  await provider.close();
  await caller.close();
  for (const dir of [p.dir, c.dir, join(net.root, 'hub')]) t.deepEqual(await filesContaining(dir, MARKER), [], dir);
});

test('issue 21 / SPEC §9.2: the local agent may stream its answer to a text task too: its progress reaches the sender as previews', async (t) => {
  const net = await startNet(t);
  const run = join(net.root, 'run-agent');
  await mkdir(run, { mode: 0o700 });
  const agent = await startSampleService(
    join(run, 'agent.sock'),
    streaming([{ text: 'thinking' }, { text: 'writing' }], 600, { text: 'hello back' }),
  );
  t.teardown(() => agent.close());
  const p = await net.node('p', {
    inbound: { policy: 'open' },
    modules: { agent: { url: `unix://${agent.socketPath}` }, preview: { enabled: true } },
  });
  const c = await net.node('c');
  await net.start(p.dir);
  const caller = await net.start(c.dir);
  const updates: TaskUpdate[] = [];
  const sent = await operate(caller.node, 'send', { aid: p.aid, text: 'hello', waitMs: 100, onUpdate: (u) => updates.push(u) });
  const done = await operate(caller.node, 'watch', { task: sent.task, waitMs: 20_000, onUpdate: (u) => updates.push(u) });
  t.like(done, { state: 'completed', result: { text: 'hello back' } });
  t.deepEqual(
    previewsOf(updates).map((p) => p.text),
    ['thinking', 'writing'],
  );
});
