// SPEC §6.2 (the extended-card fetch) and §2.3 / §10 (payments.daily_max): the typed actors the caller
// side uses (src/actors/card-fetch.ts, src/actors/spend.ts), on a real actor host and store: each method
// journals its event and answers with the outcome the machine decided, under the one id its wrapper makes.
import test from 'ava';
import { Store } from '../../store/db.js';
import { ActorHost } from '../../src/runtime/host.js';
import { ManualClock } from '../../src/runtime/clock.js';
import { cardFetch, cardFetchId, waitsFor } from '../../src/actors/card-fetch.js';
import { autoSpend, AUTO_SPEND_ID } from '../../src/actors/spend.js';
import { WAIT_MS, GUARD_MS } from '../../machines/card-fetch.js';
import { tempDir } from '../helpers/tmp.js';

const T = 1_800_000_000_000;

async function host(t: import('ava').ExecutionContext, clock = new ManualClock(T)) {
  const store = await Store.open(await tempDir(t));
  const h = await ActorHost.start(store, { clock });
  t.teardown(async () => {
    await h.close();
    await store.close();
  });
  return h;
}

test('SPEC §6.2: one card-fetch actor per provider and kind; NEED asks, the reply to its request is cached, another request id is not its reply', async (t) => {
  const h = await host(t);
  const list = cardFetch(h, 'Eaid', 'list');
  t.is(list.id, cardFetchId('Eaid', 'list'));
  t.not(list.id, cardFetch(h, 'Eaid', 'general').id);
  t.is(await list.read(), undefined, 'nothing journaled yet');
  const asked = await list.need(T, '1', 'q1');
  t.like(asked, { state: 'waiting', context: { decision: 'fetch', requestId: 'q1', waitUntil: T + WAIT_MS } });
  t.true(waitsFor(await list.read(), 'q1'));
  t.false(waitsFor(await list.read(), 'q2'));
  const cached = await list.reply({ at: T + 5, requestId: 'q1', result: 'not_configured' });
  t.like(cached, { state: 'cached', context: { outcome: { kind: 'not_configured', fetchedAt: T + 5 } } });
  t.like(await list.need(T + 6, '1', 'q3'), { state: 'cached', context: { decision: 'cached' } });
  t.like(await h.state(list.id), { value: 'cached' }, 'the id is the host’s actor');
});

test('SPEC §6.2: a TICK at the end of the wait makes the fetch unavailable, guarded for 60 s from the attempt', async (t) => {
  const h = await host(t);
  const a = cardFetch(h, 'Eaid', 'general');
  await a.need(T, '1', 'q1');
  t.like(await a.tick(T + WAIT_MS - 1), { state: 'waiting' });
  t.like(await a.tick(T + WAIT_MS), { state: 'guarded', context: { outcome: { kind: 'card_unavailable' }, guardUntil: T + GUARD_MS } });
});

test('SPEC §2.3, §10: the automatic-payment window admits amounts within daily_max, refuses past it, and an UNDO frees its amount', async (t) => {
  const h = await host(t);
  const spend = autoSpend(h);
  t.deepEqual(await spend.admit('t1', '60', '100'), { accepted: true, spent: '60' });
  t.deepEqual(await spend.admit('t2', '50', '100'), { accepted: false, spent: '60' }, 'a refused amount records nothing');
  await spend.undo('t1');
  t.deepEqual(await spend.admit('t2', '50', '100'), { accepted: true, spent: '50' });
  t.like(await h.state(AUTO_SPEND_ID), { value: 'open' });
});
