// SPEC §4.1: the provider's admission gate (src/node/provider/gate.ts) and the slots taken through it
// (slots.ts). An exclusive admission runs alone: after every shared admission under way has decided; a
// shared one waits while an exclusive one waits or runs; a refused call gives back every slot it took,
// so nothing it asked for stays held. The gates are objects a node owns, one per capability.
import test, { type ExecutionContext } from 'ava';
import { tempDir } from '../helpers/tmp.js';
import { validateConfig } from '../../src/config/load.js';
import { offeredCapabilities } from '../../src/config/check.js';
import { Store } from '../../store/db.js';
import { ActorHost } from '../../src/runtime/host.js';
import { ManualClock } from '../../src/runtime/clock.js';
import { Gate, Gates } from '../../src/node/provider/gate.js';
import { admitTogether, takeInflight, takeQuota } from '../../src/node/provider/slots.js';
import type { Checked } from '../../src/node/provider/checks.js';
import { bucket, quotaIds } from '../../src/actors/bucket.js';
import { inflight } from '../../src/actors/inflight.js';
import { testIdentity } from '../helpers/identity.js';

const [A, B] = ['gate-a', 'gate-b'].map((tag) => testIdentity(tag).kel.aid) as [string, string];

test('SPEC §4.1: an exclusive admission runs only once every shared admission under way has decided', async (t) => {
  const gate = new Gate();
  const first = await gate.enter();
  const second = await gate.enter();
  const order: string[] = [];
  const alone = gate.exclusive(async () => {
    order.push('exclusive');
    return 'ran';
  });
  first.decide(false);
  order.push('first decided');
  // A ticket decides once: a second word changes nothing.
  first.decide(true);
  t.false(await first.decided);
  second.decide(true);
  order.push('second decided');
  t.is(await alone, 'ran');
  t.deepEqual(order, ['first decided', 'second decided', 'exclusive']);
  t.is(gate.open.size, 0);
});

test('SPEC §4.1: a shared admission waits while an exclusive one waits or runs; exclusive ones run in turn', async (t) => {
  const gate = new Gate();
  const order: string[] = [];
  let finishFirst!: () => void;
  const firstRuns = new Promise<void>((resolve) => (finishFirst = resolve));
  let firstStarted!: () => void;
  const started = new Promise<void>((resolve) => (firstStarted = resolve));
  const one = gate.exclusive(async () => {
    order.push('one starts');
    firstStarted();
    await firstRuns;
    order.push('one ends');
  });
  const two = gate.exclusive(async () => void order.push('two'));
  const shared = gate.enter().then((ticket) => {
    order.push('shared enters');
    ticket.decide(false);
  });
  await started;
  finishFirst();
  await Promise.all([one, two, shared]);
  t.deepEqual(order, ['one starts', 'one ends', 'two', 'shared enters']);
});

test('SPEC §4.1: only tickets whose events were sent before count as earlier; a failed exclusive one does not stop the next', async (t) => {
  const gate = new Gate();
  const a = await gate.enter();
  const b = await gate.enter();
  const c = await gate.enter();
  a.sent = true;
  c.sent = true;
  t.deepEqual(gate.sentBefore(c), [a]);
  for (const ticket of [a, b, c]) ticket.decide(false);
  await t.throwsAsync(
    gate.exclusive(() => Promise.reject(new Error('journal write failed'))),
    { message: 'journal write failed' },
  );
  t.is(await gate.exclusive(async () => 'next'), 'next');
  const ticket = await gate.enter();
  t.true(gate.open.has(ticket), 'a shared admission enters once no exclusive one waits');
  ticket.decide(false);
});

test('SPEC §4.1: one gate per capability, kept by the Gates a node owns', (t) => {
  const gates = new Gates();
  t.is(gates.of('text.echo'), gates.of('text.echo'));
  t.not(gates.of('text.echo'), gates.of('text.upper'));
  t.not(new Gates().of('text.echo'), gates.of('text.echo'));
});

async function slots(t: ExecutionContext, inbound: Record<string, unknown>) {
  const dataDir = await tempDir(t);
  const store = await Store.open(dataDir);
  const host = await ActorHost.start(store, { clock: new ManualClock(1_800_000_000_000) });
  t.teardown(async () => {
    await host.close();
    await store.close();
  });
  const r = validateConfig({
    inbound: { policy: 'open', public_capabilities: [{ id: 'text.echo', ...inbound }] },
    modules: { service: { capabilities: [{ id: 'text.echo', url: 'unix:///run/anet-test/text.echo.sock' }] } },
  });
  if (!r.config) throw new Error(JSON.stringify(r.problems));
  const checked: Checked = { capability: offeredCapabilities(r.config)[0]!, files: [], listed: false };
  const callIn = (from: string, id: string) => ({ id, from, capability: 'text.echo', args: {} });
  const stamps = async (caller: string) => (await bucket(host, quotaIds('text.echo', caller).callerMin).context())?.chunks.flat() ?? [];
  return { parts: { host, gates: new Gates() }, checked, callIn, host, stamps };
}

test('SPEC §4.1: a shared admission refused by the in-flight count gives back the windows it took; a release frees the slot', async (t) => {
  const s = await slots(t, { max_inflight: 1, per_caller_inflight: 1 });
  const [, first] = await admitTogether(s.parts, s.checked, s.callIn(A, 'a1'), () => Promise.resolve(null));
  t.true(first.admitted);
  const [together, second] = await admitTogether(s.parts, s.checked, s.callIn(B, 'b1'), () => Promise.resolve('sent beside'));
  t.is(together, 'sent beside');
  t.like(second, { admitted: false, reason: 'max_inflight', listed: false });
  t.deepEqual(await s.stamps(B), [], 'the refused call holds no window');
  if (first.admitted) await first.release();
  t.deepEqual(await inflight(s.host, 'text.echo').running(), {});
  t.is((await s.stamps(A)).length, 1, 'a release without undoQuota keeps the window: the call ran');
});

test('SPEC §4.1, §10: a quoted call takes its windows alone, gives them back on release(true), and takes its slot once paid', async (t) => {
  const s = await slots(t, { per_caller_per_min: 1, max_inflight: 1, per_caller_inflight: 1 });
  const quoted = await takeQuota(s.parts, s.checked, s.callIn(A, 'a1'));
  t.true(quoted.admitted);
  t.like(await takeQuota(s.parts, s.checked, s.callIn(A, 'a2')), { admitted: false, reason: 'quota_caller_per_min' });
  t.deepEqual(await inflight(s.host, 'text.echo').running(), {}, 'a quote holds no in-flight slot');
  const slot = await takeInflight(s.parts, s.checked.capability, s.callIn(A, 'a1'));
  t.false('admitted' in slot);
  t.like(await takeInflight(s.parts, s.checked.capability, s.callIn(B, 'b1')), { admitted: false, reason: 'max_inflight' });
  if (!('admitted' in slot)) await slot.release();
  t.deepEqual(await inflight(s.host, 'text.echo').running(), {});
  if (quoted.admitted) await quoted.release(true);
  t.deepEqual(await s.stamps(A), [], 'the window came back');
});
