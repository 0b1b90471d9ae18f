// SPEC §10: the quotes waiting for payment (src/node/provider/quotes.ts), an object the node owns. A
// quote is taken once (a second payment of the same task finds nothing); past its time it is let go and
// the call is told to end; how many may wait is bounded per capability and per caller by four times the
// in-flight limits.
import test, { type ExecutionContext } from 'ava';
import { tempDir } from '../helpers/tmp.js';
import { validateConfig } from '../../src/config/load.js';
import { offeredCapabilities, type OfferedCapability } from '../../src/config/check.js';
import { Store } from '../../store/db.js';
import { ActorHost } from '../../src/runtime/host.js';
import { call } from '../../src/actors/call.js';
import { WaitingQuotes, WAITING_PER_INFLIGHT, type Quoted } from '../../src/node/provider/quotes.js';
import { testIdentity } from '../helpers/identity.js';

const [A, B] = ['quotes-a', 'quotes-b'].map((tag) => testIdentity(tag).kel.aid) as [string, string];
const HOUR = 3_600_000;

async function fixture(t: ExecutionContext) {
  const dataDir = await tempDir(t);
  const store = await Store.open(dataDir);
  const host = await ActorHost.start(store);
  t.teardown(async () => {
    await host.close();
    await store.close();
  });
  const r = validateConfig({
    inbound: { policy: 'open', public_capabilities: [{ id: 'text.paid', max_inflight: 2, per_caller_inflight: 1 }, { id: 'text.other' }] },
    modules: { service: { capabilities: ['text.paid', 'text.other'].map((id) => ({ id, url: `unix:///run/anet-test/${id}.sock` })) } },
  });
  if (!r.config) throw new Error(JSON.stringify(r.problems));
  const caps = offeredCapabilities(r.config);
  const quote = (cap: OfferedCapability, caller: string, task: string): Quoted => ({
    record: call(host, caller, task),
    call: { caller, task, capability: cap.id },
    argsText: '{}',
    capability: cap,
    files: [],
    listed: false,
    undoQuota: async () => {},
  });
  return { paid: caps.find((c) => c.id === 'text.paid')!, other: caps.find((c) => c.id === 'text.other')!, quote };
}

test('SPEC §10: a waiting quote is taken once; a second payment of the same task finds nothing', async (t) => {
  const f = await fixture(t);
  const quotes = new WaitingQuotes();
  const q = f.quote(f.paid, A, 't1');
  quotes.hold(q, HOUR, () => t.fail('taken before its time'));
  t.is(quotes.size, 1);
  t.is(quotes.take(q.record.id), q);
  t.is(quotes.take(q.record.id), undefined);
  t.is(quotes.size, 0);
});

test('SPEC §10: past its time a quote is let go and its call told to end; one taken before never is', async (t) => {
  const f = await fixture(t);
  const quotes = new WaitingQuotes();
  const endedCalls: string[] = [];
  const taken = f.quote(f.paid, A, 'taken');
  const left = f.quote(f.paid, B, 'left');
  // Same delay, held in this order: the first one's timer would fire before the second one's.
  quotes.hold(taken, 1, () => endedCalls.push('taken'));
  const expired = new Promise<void>((resolve) =>
    quotes.hold(left, 1, () => {
      endedCalls.push('left');
      resolve();
    }),
  );
  t.is(quotes.take(taken.record.id), taken);
  await expired;
  t.deepEqual(endedCalls, ['left']);
  t.is(quotes.take(left.record.id), undefined, 'an expired quote is gone');
});

test('SPEC §10: waiting quotes are bounded per capability and per caller by four times the in-flight limits', async (t) => {
  const f = await fixture(t);
  const quotes = new WaitingQuotes();
  t.is(WAITING_PER_INFLIGHT, 4);
  // per_caller_inflight 1: four quotes of one caller fill its share.
  for (let i = 0; i < 4; i++) {
    t.is(quotes.roomFor(f.paid, A), null);
    quotes.hold(f.quote(f.paid, A, `a${i}`), HOUR, () => {});
  }
  t.is(quotes.roomFor(f.paid, A), 'caller_inflight');
  // Another capability's quotes are counted apart.
  t.is(quotes.roomFor(f.other, A), null);
  // max_inflight 2: eight quotes of the capability fill it for everyone.
  for (let i = 0; i < 4; i++) quotes.hold(f.quote(f.paid, B, `b${i}`), HOUR, () => {});
  t.is(quotes.roomFor(f.paid, B), 'max_inflight');
  t.is(quotes.roomFor(f.paid, testIdentity('quotes-c').kel.aid), 'max_inflight');
  quotes.take(f.quote(f.paid, B, 'b0').record.id);
  t.is(quotes.roomFor(f.paid, B), null, 'a quote taken frees its place');
  for (let i = 0; i < 4; i++) quotes.take(f.quote(f.paid, A, `a${i}`).record.id);
  for (let i = 1; i < 4; i++) quotes.take(f.quote(f.paid, B, `b${i}`).record.id);
  t.is(quotes.size, 0);
});
