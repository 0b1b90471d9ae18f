// SPEC §4.1, §14: what one free call journals, and in which batches. The provider sends a call's three
// quota windows' ADMIT, its in-flight START and the call's RECEIVED in one tick, so they share one
// journal batch (one fsync admits the call); its outcome and the slot's FINISH share the next. A step
// that awaited between those sends would split them: more fsyncs a call, and a crash between them
// would leave a window taken for a call never received. The batches are read back from the journal's
// hash chain (store/chain.ts), which keeps one link per batch.
import test from 'ava';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { startNet } from './helpers/net.js';
import { runCli } from './helpers/cli.js';
import { startSampleService, echoHandler } from '../src/service/sample.js';
import type { Store } from '../store/db.js';

interface Entry {
  seq: number;
  actor: string;
  type: string;
}

/** The journal's entries, each with its seq, actor and event type. */
async function journal(store: Store): Promise<Entry[]> {
  const out: Entry[] = [];
  for await (const [key, value] of store.journal.iterator()) {
    const e = value as { actor: string; event: { type: string } };
    out.push({ seq: Number(key), actor: e.actor, type: e.event.type });
  }
  return out;
}

/** The journal's batches as [first seq, last seq], from the hash chain's links. */
async function batches(store: Store): Promise<[number, number][]> {
  const out: [number, number][] = [];
  for await (const [key, value] of store.chain.iterator()) out.push([(value as { from: number }).from, Number(key)]);
  return out;
}

test('SPEC §4.1, §14: a free call is admitted in one journal batch (three ADMIT, START, RECEIVED) and ended in the next (its outcome, FINISH)', async (t) => {
  const net = await startNet(t);
  const run = join(net.root, 'run');
  await mkdir(run, { mode: 0o700 });
  const service = await startSampleService(join(run, 'svc.sock'), echoHandler);
  t.teardown(() => service.close());
  const caps = [{ id: 'demo.echo' }];
  const p = await net.node('p', {
    inbound: { policy: 'open', public_capabilities: caps },
    modules: { service: { capabilities: [{ id: 'demo.echo', url: `unix://${service.socketPath}` }] } },
  });
  const c = await net.node('c');
  const provider = await net.start(p.dir);
  await net.start(c.dir);
  const r = await runCli(['call', p.aid, 'demo.echo', '--args', '{"text":"one"}', '--json', '--data', c.dir]);
  t.is(JSON.parse(r.stdout).state, 'completed', r.stderr);

  const store = provider.node.store;
  const ofCall = (await journal(store)).filter(
    (e) => e.actor.startsWith('quota/demo.echo/') || e.actor === 'inflight/demo.echo' || e.actor.startsWith(`call/${c.aid}/`),
  );
  const admission = ofCall.filter((e) => ['ADMIT', 'START', 'RECEIVED'].includes(e.type));
  const ending = ofCall.filter((e) => ['COMPLETED', 'FINISH'].includes(e.type));
  t.deepEqual(admission.map((e) => e.type).sort(), ['ADMIT', 'ADMIT', 'ADMIT', 'RECEIVED', 'START'], JSON.stringify(ofCall));
  t.deepEqual(ending.map((e) => e.type).sort(), ['COMPLETED', 'FINISH'], JSON.stringify(ofCall));

  const links = await batches(store);
  const batchOf = (seq: number) => links.find(([from, to]) => from <= seq && seq <= to);
  const first = batchOf(admission[0]!.seq);
  t.truthy(first, 'the admission is in a linked batch');
  for (const e of admission) t.deepEqual(batchOf(e.seq), first, `${e.type} on ${e.actor} shares the admission's batch`);
  const second = batchOf(ending[0]!.seq);
  t.truthy(second, 'the outcome is in a linked batch');
  t.notDeepEqual(second, first, 'the outcome lands after the admission, in a batch of its own');
  for (const e of ending) t.deepEqual(batchOf(e.seq), second, `${e.type} on ${e.actor} shares the outcome's batch`);
});
