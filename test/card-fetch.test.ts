// SPEC §6.2: the card-fetch machine's timings as explicit states, and the reply limiter, through the
// real actor host so the deadlines also hold across a restart.
import test from 'ava';
import { transition, initialTransition, type AnyMachineSnapshot } from 'xstate';
import { cardFetchMachine, WAIT_MS, CACHE_MS, GUARD_MS, type CardFetchContext } from '../machines/card-fetch.js';
import { Store } from '../store/db.js';
import { ActorHost } from '../src/runtime/host.js';
import { ManualClock } from '../src/runtime/clock.js';
import { REPLY_LIMIT } from '../src/runtime/kinds.js';
import type { BucketContext } from '../machines/bucket.js';
import { tempDir } from './helpers/tmp.js';

const T = 1_800_000_000_000;
const c = (s: AnyMachineSnapshot) => s.context as CardFetchContext;
const send = (s: AnyMachineSnapshot, e: object) => transition(cardFetchMachine, s as never, e as never)[0];
const need = (s: AnyMachineSnapshot, at: number, requestId = `r${at}`, publicSeq = '1') => send(s, { type: 'NEED', at, publicSeq, requestId });

test('SPEC §6.2: a fetch waits 10 s at most, then the card is unavailable and not fetched again for 60 s', (t) => {
  let s: AnyMachineSnapshot = initialTransition(cardFetchMachine)[0];
  s = need(s, T);
  t.is(s.value, 'waiting');
  t.is(c(s).decision, 'fetch');
  t.is(c(s).deadline, T + WAIT_MS);
  t.is(send(s, { type: 'TICK', at: T + WAIT_MS - 1 }).value, 'waiting');
  s = send(s, { type: 'TICK', at: T + WAIT_MS });
  t.is(s.value, 'idle');
  t.deepEqual(c(s).outcome, { kind: 'card_unavailable' });
  // A late answer to the old request is ignored.
  t.is(send(s, { type: 'REPLY', at: T + WAIT_MS + 1, requestId: `r${T}`, result: 'ok', wire: '{}' }).value, 'idle');
  t.is(c(need(s, T + GUARD_MS - 1)).decision, 'guarded');
  t.is(c(need(s, T + GUARD_MS)).decision, 'fetch');
});

test('SPEC §6.2: a fetched card is kept 24 h, stale at once on a newer public seq, and the 60 s guard holds after success too', (t) => {
  let s = need(initialTransition(cardFetchMachine)[0], T);
  s = send(s, { type: 'REPLY', at: T + 500, requestId: `r${T}`, result: 'ok', wire: '{"card":1}' });
  t.is(s.value, 'cached');
  t.like(c(s).outcome, { kind: 'ok', wire: '{"card":1}', fetchedAt: T + 500 });
  t.is(c(s).deadline, T + 500 + CACHE_MS);
  t.is(c(need(s, T + 500 + CACHE_MS - 1)).decision, 'cached');
  t.is(c(need(s, T + 500 + CACHE_MS)).decision, 'fetch', 'expired after 24 h');
  t.is(send(s, { type: 'TICK', at: T + 500 + CACHE_MS }).value, 'idle');
  // A new public seq makes it stale at once — but within 60 s of the last attempt it is not refetched.
  t.is(c(need(s, T + 1000, 'x', '2')).decision, 'guarded');
  t.is(c(need(s, T + GUARD_MS, 'x', '2')).decision, 'fetch');
  t.is(send(s, { type: 'PUBLIC_SEQ', at: T + 2000, publicSeq: '2' }).value, 'idle');
  t.is(send(s, { type: 'PUBLIC_SEQ', at: T + 2000, publicSeq: '1' }).value, 'cached', 'the same seq changes nothing');
});

test('SPEC §6.3: not_configured is cached like a card; a bad signature is not', (t) => {
  const first = need(initialTransition(cardFetchMachine)[0], T);
  const nc = send(first, { type: 'REPLY', at: T + 1, requestId: `r${T}`, result: 'not_configured' });
  t.is(nc.value, 'cached');
  t.like(c(nc).outcome, { kind: 'not_configured' });
  const bad = send(first, { type: 'REPLY', at: T + 1, requestId: `r${T}`, result: 'invalid' });
  t.is(bad.value, 'idle');
  t.deepEqual(c(bad).outcome, { kind: 'card_signature_invalid' });
  t.is(c(need(bad, T + 2)).decision, 'guarded');
});

test('SPEC §6.2: the wait deadline survives a restart of the reader (host re-arms it)', async (t) => {
  const dir = await tempDir(t);
  let store = await Store.open(dir);
  let host = await ActorHost.start(store, { clock: new ManualClock(T) });
  const s = await host.send('fetch:peer', 'card-fetch', undefined, { type: 'NEED', publicSeq: '1', requestId: 'q1' });
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
  t.is(after!.value, 'idle');
  t.deepEqual(c(after!).outcome, { kind: 'card_unavailable' });
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
