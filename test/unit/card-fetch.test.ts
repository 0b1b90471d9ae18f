// SPEC §6.2: the card-fetch machine's timings as explicit states, and the reply limiter, through the
// real actor host so the deadlines also hold across a restart.
import test from 'ava';
import { transition, initialTransition, type AnyMachineSnapshot } from 'xstate';
import { cardFetchMachine, WAIT_MS, CACHE_MS, GUARD_MS, type CardFetchContext } from '../../machines/card-fetch.js';
import { Store } from '../../store/db.js';
import { ActorHost } from '../../src/runtime/host.js';
import { ManualClock } from '../../src/runtime/clock.js';
import { REPLY_LIMIT } from '../../src/runtime/kinds.js';
import type { BucketContext } from '../../machines/bucket.js';
import { tempDir } from '../helpers/tmp.js';

const T = 1_800_000_000_000;
const c = (s: AnyMachineSnapshot) => s.context as CardFetchContext;
const send = (s: AnyMachineSnapshot, e: object) => transition(cardFetchMachine, s as never, e as never)[0];
const need = (s: AnyMachineSnapshot, at: number, requestId = `r${at}`, publicSeq = '1') =>
  send(s, { type: 'NEED', at, publicSeq, requestId });

test('SPEC §6.2: a fetch waits 10 s at most, then the card is unavailable and the 60 s guard is a state with its deadline', (t) => {
  let s: AnyMachineSnapshot = initialTransition(cardFetchMachine)[0];
  s = need(s, T);
  t.is(s.value, 'waiting');
  t.is(c(s).decision, 'fetch');
  t.is(c(s).deadline, T + WAIT_MS);
  t.is(send(s, { type: 'TICK', at: T + WAIT_MS - 1 }).value, 'waiting');
  s = send(s, { type: 'TICK', at: T + WAIT_MS });
  t.is(s.value, 'guarded');
  t.deepEqual(c(s).outcome, { kind: 'card_unavailable' });
  t.is(c(s).guardUntil, T + GUARD_MS, 'counted from the attempt');
  t.is(c(s).deadline, T + GUARD_MS, 'the host wakes the machine when the guard ends');
  // A late answer to the old request is ignored.
  t.is(send(s, { type: 'REPLY', at: T + WAIT_MS + 1, requestId: `r${T}`, result: 'ok', wire: '{}' }).value, 'guarded');
  const held = need(s, T + GUARD_MS - 1);
  t.is(held.value, 'guarded');
  t.is(c(held).decision, 'guarded');
  t.is(send(s, { type: 'TICK', at: T + GUARD_MS - 1 }).value, 'guarded');
  const over = send(s, { type: 'TICK', at: T + GUARD_MS });
  t.is(over.value, 'idle');
  t.is(c(over).deadline, null);
  t.is(c(need(over, T + GUARD_MS)).decision, 'fetch');
  t.is(c(need(s, T + GUARD_MS)).decision, 'fetch', 'a NEED at the end of the guard need not wait for its TICK');
});

test('SPEC §6.2: a fetched card is kept 24 h; a newer public seq is a new card, asked for at once, the older one held meanwhile', (t) => {
  let s = need(initialTransition(cardFetchMachine)[0], T);
  s = send(s, { type: 'REPLY', at: T + 500, requestId: `r${T}`, result: 'ok', wire: '{"card":1}' });
  t.is(s.value, 'cached');
  t.like(c(s).outcome, { kind: 'ok', wire: '{"card":1}', fetchedAt: T + 500 });
  t.like(c(s).held, { publicSeq: '1', expiresAt: T + 500 + CACHE_MS });
  t.is(c(s).deadline, T + 500 + CACHE_MS);
  t.is(c(need(s, T + 500 + CACHE_MS - 1)).decision, 'cached');
  t.is(c(need(s, T + 500 + CACHE_MS)).decision, 'fetch', 'expired after 24 h');
  const expired = send(s, { type: 'TICK', at: T + 500 + CACHE_MS });
  t.is(expired.value, 'idle');
  t.is(c(expired).held, null);
  // A new public seq makes it stale at once, and it is asked for at once, 60 s guard or not.
  const renewed = need(s, T + 1000, 'x', '2');
  t.is(c(renewed).decision, 'fetch');
  t.like(c(renewed).held, { publicSeq: '1' }, 'the older card is held while the newer is asked for');
  const failed = send(renewed, { type: 'TICK', at: T + 1000 + WAIT_MS });
  t.is(failed.value, 'guarded');
  t.like(c(failed).held, { publicSeq: '1' }, 'and after the newer could not be had');
  t.like(c(need(failed, T + 2000 + WAIT_MS, 'y', '2')), { decision: 'guarded' });
  t.is(c(need(failed, T + 2000 + WAIT_MS, 'y', '3')).decision, 'fetch', 'a still newer seq is another card');
  t.is(c(need(failed, T + 500 + CACHE_MS, 'y', '2')).held, null, 'never held past its 24 h');
  const moved = send(s, { type: 'PUBLIC_SEQ', at: T + 2000, publicSeq: '2' });
  t.is(moved.value, 'idle');
  t.like(c(moved).held, { publicSeq: '1' });
  t.is(send(s, { type: 'PUBLIC_SEQ', at: T + 2000, publicSeq: '1' }).value, 'cached', 'the same seq changes nothing');
});

test('SPEC §6.3: not_configured is cached like a card; a bad signature is not, and drops what was held', (t) => {
  const first = need(initialTransition(cardFetchMachine)[0], T);
  const nc = send(first, { type: 'REPLY', at: T + 1, requestId: `r${T}`, result: 'not_configured' });
  t.is(nc.value, 'cached');
  t.like(c(nc).outcome, { kind: 'not_configured' });
  const bad = send(first, { type: 'REPLY', at: T + 1, requestId: `r${T}`, result: 'invalid' });
  t.is(bad.value, 'guarded');
  t.deepEqual(c(bad).outcome, { kind: 'card_signature_invalid' });
  t.is(c(need(bad, T + 2)).decision, 'guarded');
  const asked = need(nc, T + 5, 'z', '2');
  t.like(c(asked).held, { publicSeq: '1' });
  t.is(c(send(asked, { type: 'REPLY', at: T + 6, requestId: 'z', result: 'invalid' })).held, null);
});

test('SPEC §6.2: the wait and guard deadlines survive a restart of the reader (host re-arms them)', async (t) => {
  const dir = await tempDir(t);
  let store = await Store.open(dir);
  let host = await ActorHost.start(store, { clock: new ManualClock(T) });
  const s = await host.send('fetch:peer', 'card-fetch-v2', undefined, { type: 'NEED', publicSeq: '1', requestId: 'q1' });
  t.is(s.value, 'waiting');
  await host.close();
  await store.close();
  const clock = new ManualClock(T + 4000);
  store = await Store.open(dir);
  host = await ActorHost.start(store, { clock });
  await clock.advanceTo(T + WAIT_MS - 1, () => host.idle());
  t.is((await host.state('fetch:peer'))!.value, 'waiting');
  await clock.advanceTo(T + WAIT_MS, () => host.idle());
  const after = await host.state('fetch:peer');
  t.is(after!.value, 'guarded');
  t.deepEqual(c(after!).outcome, { kind: 'card_unavailable' });
  // The guard's deadline is re-armed after a restart too.
  await host.close();
  await store.close();
  store = await Store.open(dir);
  host = await ActorHost.start(store, { clock });
  t.is((await host.state('fetch:peer'))!.value, 'guarded');
  await clock.advanceTo(T + GUARD_MS, () => host.idle());
  t.is((await host.state('fetch:peer'))!.value, 'idle');
  await host.close();
  await store.close();
});

test('SPEC §6.2: a provider answers one sender at most 6 card requests in any 60 s', async (t) => {
  const dir = await tempDir(t);
  const clock = new ManualClock(T);
  const store = await Store.open(dir);
  const host = await ActorHost.start(store, { clock });
  const answered: boolean[] = [];
  for (let i = 0; i < 8; i++) {
    const s = await host.send('reply:sender', 'reply-limiter', REPLY_LIMIT, { type: 'ADMIT' });
    answered.push((s.context as BucketContext).last!.admitted);
    await clock.advance(5000, () => host.idle());
  }
  t.deepEqual(answered, [true, true, true, true, true, true, false, false]);
  await clock.advanceTo(T + 60_000, () => host.idle());
  const s = await host.send('reply:sender', 'reply-limiter', REPLY_LIMIT, { type: 'ADMIT' });
  t.true((s.context as BucketContext).last!.admitted, 'the first request left the window');
  await host.close();
  await store.close();
});

test('SPEC §6.2: a reply for a newer public seq than asked (the provider published since) is held as that seq', (t) => {
  const asked = need(initialTransition(cardFetchMachine)[0], T, 'q', '2');
  const got = send(asked, { type: 'REPLY', at: T + 1, requestId: 'q', result: 'ok', wire: '{}', digest: 'd', seq: '3' });
  t.is(got.value, 'cached');
  t.like(c(got).held, { publicSeq: '3', answer: { digest: 'd' } });
  t.is(c(need(got, T + 2, 'r', '2')).decision, 'cached', 'a look at the older public card is served');
  t.is(c(need(got, T + 2, 'r', '4')).decision, 'fetch');
  const older = send(asked, { type: 'REPLY', at: T + 1, requestId: 'q', result: 'ok', wire: '{}', seq: '1' });
  t.like(c(older).held, { publicSeq: '2' }, 'a seq below the asked one never lowers it');
});
