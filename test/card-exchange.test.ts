// SPEC §6.1–6.3, §5.3–5.4, §7, §8: extended cards end to end between real daemons through a real hub
// relay — every row of the §6.3 table, the fetch conditions, the 10 s / 24 h / 60 s timings, the
// provider's six-per-minute limit, contact credentials, and allow_only invisibility.
import test, { type ExecutionContext } from 'ava';
import { join } from 'node:path';
import { filesContaining } from './helpers/files.js';
import { until } from './helpers/wait.js';
import { startNet, providerConfig, rawPeer, type Net } from './helpers/net.js';
import { toBody } from '../src/protocol/body.js';
import { CARD_REQUEST, CARD_REPLY } from '../src/protocol/messages.js';
import type { CardFetchContext } from '../machines/card-fetch.js';
import { publicSeqOf } from '../src/reader/fetch.js';
import { cardFetchId as actorOf } from '../src/actors/card-fetch.js';
import { HubClient } from '../src/hub-client/client.js';
import { EXT_PRICE } from '../src/protocol/card/constants.js';
import type { BucketContext } from '../machines/bucket.js';
import type { Daemon } from '../src/daemon/daemon.js';
import { runCli } from './helpers/cli.js';

const card = async (aid: string, dir: string) => {
  const r = await runCli(['card', aid, '--json', '--data', dir]);
  return { ...JSON.parse(r.stdout || '{}'), code: r.code, stderr: r.stderr };
};

test('SPEC §6.3 row 2: a priced provider is contacted; all skills and signed prices; cached, not fetched again', async (t) => {
  const net = await startNet(t);
  const p = await net.node('p', providerConfig([{ id: 'text.summarize' }, { id: 'text.translate', price: 3 }], 'open'));
  const c = await net.node('c');
  await net.start(p.dir);
  await net.start(c.dir);
  const before = net.envelopes();
  const view = await card(p.aid, c.dir);
  t.is(view.code, 0, view.stderr);
  t.like(view, { aid: p.aid, verified: true, key: 'confirmed', charge: 'some skills paid', extended: 'ok', reason: null });
  t.deepEqual(view.prices, [{ skillId: 'text.translate', amount: '3' }]);
  t.true(typeof view.fetchedAt === 'number');
  t.regex(view.explanation, /^Prices are signed by the other side, fetched \d\d-\d\d \d\d:\d\d;/);
  t.is(net.envelopes() - before, 2, 'one request and one reply');

  const text = await runCli(['card', p.aid, '--data', c.dir]);
  t.is(text.code, 0, text.stderr);
  const lines = text.stdout.split('\n');
  t.is(lines[0], `anet agent ${p.aid.slice(0, 12)} ${p.aid} (verified, key confirmed) some skills paid`);
  t.deepEqual(lines.slice(1, 4), ['chat            free', 'text.summarize  free', 'text.translate  3 credits']);
  t.regex(lines[4]!, /^Prices are signed by the other side/);
  t.is(net.envelopes() - before, 2, 'the second look is served from the 24 h cache');
});

test('SPEC §6.1, §6.3 row 1: a free provider with no credential is never contacted; anet find never contacts anyone', async (t) => {
  const net = await startNet(t);
  const p = await net.node('p', providerConfig([{ id: 'text.summarize', description: 'Summarise.' }], 'open'));
  const c = await net.node('c');
  await net.start(p.dir);
  await net.start(c.dir);
  const before = net.envelopes();
  const found = await runCli(['find', 'summarise', '--data', c.dir]);
  t.is(found.code, 0, found.stderr);
  t.true(found.stdout.includes(p.aid));
  const view = await card(p.aid, c.dir);
  t.like(view, { verified: true, charge: 'free', extended: 'not_applicable', reason: 'not_applicable', prices: null, fetchedAt: null });
  t.regex(view.explanation, /not contacted/);
  // Even a paid provider is not contacted by find.
  const paid = await net.node('paid', providerConfig([{ id: 'text.summarize', price: 5 }]));
  await net.start(paid.dir);
  const all = await runCli(['find', '--data', c.dir, '--json']);
  t.is(JSON.parse(all.stdout).length, 2);
  t.is(JSON.parse((await runCli(['find', '--limit', '1', '--data', c.dir, '--json'])).stdout).length, 1);
  // SPEC §6.4, GUIDE §6.1: a limit that is no whole number in 1..100 is a usage error, with or without a daemon to ask.
  const bad = await runCli(['find', '--limit', 'abc', '--data', c.dir]);
  t.is(bad.code, 2);
  t.is(bad.stderr.trim(), 'anet: --limit must be a whole number from 1 to 100, not "abc" (see `anet help`)');
  t.is(net.envelopes(), before, 'no envelope passed the hub');
});

test('SPEC §6.3 row 4, §6.2: an offline provider gives card_unavailable after the 10 s wait; no refetch within 60 s', async (t) => {
  const net = await startNet(t);
  const p = await net.node('p', providerConfig([{ id: 'text.translate', price: 3 }]));
  const c = await net.node('c');
  const provider = await net.start(p.dir);
  await provider.close(); // its key set stays on the hub; envelopes to it are queued and never answered
  await net.start(c.dir);
  const before = net.envelopes();
  const pending = card(p.aid, c.dir);
  await until(() => net.envelopes() - before === 1, 'the request');
  net.clock.advance(10_000);
  const view = await pending;
  t.like(view, { verified: true, charge: 'paid', extended: null, reason: 'card_unavailable', prices: null });
  t.regex(view.explanation, /could not be obtained/);
  t.is(view.nextAttemptAt, null, 'this attempt was made now');
  net.clock.advance(45_000); // (real time passes too: stay clear of the 60 s edge)
  const guarded = await card(p.aid, c.dir);
  t.like(guarded, { reason: 'card_unavailable', extended: null, stale: false });
  t.is(guarded.nextAttemptAt - guarded.lastAttemptAt, 60_000);
  t.regex(
    guarded.explanation,
    /Not asked again now: the agent was last asked 5\d s ago, and is asked at most once a minute; the next attempt is allowed at \d\d:\d\d:\d\d\.$/,
  );
  t.is(net.envelopes() - before, 1, 'inside 60 s of the attempt: not sent again');
  net.clock.advance(5_000);
  const again = card(p.aid, c.dir);
  await until(() => net.envelopes() - before === 2, 'a new request after 60 s');
  net.clock.advance(10_000);
  t.like(await again, { reason: 'card_unavailable' });
});

test('SPEC §6.3 row 4: a provider that never published encryption keys is unavailable at once', async (t) => {
  const net = await startNet(t);
  const p = await net.node('p', providerConfig([{ id: 'text.translate', price: 3 }]));
  const reg = await runCli(['hub-register', '--name', 'keyless', '--data', p.dir]);
  t.is(reg.code, 0, reg.stderr);
  const c = await net.node('c');
  await net.start(c.dir);
  const before = net.envelopes();
  t.like(await card(p.aid, c.dir), { verified: true, extended: null, reason: 'card_unavailable' });
  t.is(net.envelopes(), before);
});

const allowOnlyProvider = (price: number | undefined) =>
  providerConfig([
    { id: 'text.translate', ...(price ? { price } : {}) },
    { id: 'secret.tool', price: 7, allow_only: true, description: 'A tool for listed peers.' },
  ]);

test('SPEC §5.3, §7: a listed peer gets the list card and a credential; a stranger the general card; not_configured; removal revokes', async (t) => {
  const net = await startNet(t);
  const p = await net.node('p', allowOnlyProvider(3));
  const c = await net.node('c');
  const s = await net.node('s');
  t.is((await runCli(['allow', 'add', c.aid, '--data', p.dir])).code, 0);
  let provider = await net.start(p.dir);
  const reader = await net.start(c.dir);
  await net.start(s.dir);

  const listed = await card(p.aid, c.dir);
  t.like(listed, { extended: 'ok', charge: 'paid' });
  t.deepEqual(
    listed.card.skills.map((k: { id: string }) => k.id),
    ['secret.tool', 'text.translate'],
  );
  t.deepEqual(listed.prices, [
    { skillId: 'secret.tool', amount: '7' },
    { skillId: 'text.translate', amount: '3' },
  ]);
  t.true(await reader.node.fetcher.credentialFrom(p.aid), 'the reply carried a contact credential');

  const stranger = await card(p.aid, s.dir);
  t.like(stranger, { extended: 'ok' });
  t.deepEqual(
    stranger.card.skills.map((k: { id: string }) => k.id),
    ['text.translate'],
  );
  t.false(JSON.stringify(stranger).includes('secret.tool'));

  // Free now, nothing hidden: the credential still lets c fetch, and the list card adds nothing.
  await provider.close();
  await net.configure(p.dir, providerConfig([{ id: 'text.translate' }]));
  provider = await net.start(p.dir);
  net.clock.advance(61_000);
  let before = net.envelopes();
  t.like(await card(p.aid, c.dir), { charge: 'free', extended: 'not_configured', reason: 'not_configured' });
  t.is(net.envelopes() - before, 2);
  before = net.envelopes();
  t.like(await card(p.aid, s.dir), { extended: 'not_applicable' });
  t.is(net.envelopes(), before, 'no credential, no x402: the stranger does not contact it');

  // Removed from the allow list (read on every decision): the general card and no credential.
  await provider.close();
  await net.configure(p.dir, allowOnlyProvider(3));
  provider = await net.start(p.dir);
  t.is((await runCli(['allow', 'rm', c.aid, '--data', p.dir])).code, 0);
  net.clock.advance(61_000);
  const removed = await card(p.aid, c.dir);
  t.like(removed, { extended: 'ok' });
  t.deepEqual(
    removed.card.skills.map((k: { id: string }) => k.id),
    ['text.translate'],
  );
  t.false(await reader.node.fetcher.credentialFrom(p.aid), 'an answer without a credential revokes it');
});

/** A priced provider with an allow_only skill, and a reader on its `list` that has fetched its list card once. */
async function listedReader(t: ExecutionContext, list: 'allow' | 'trust') {
  const net = await startNet(t);
  const p = await net.node('p', allowOnlyProvider(3));
  const c = await net.node('c');
  t.is((await runCli([list, 'add', c.aid, '--data', p.dir])).code, 0);
  const provider = await net.start(p.dir);
  const reader = await net.start(c.dir);
  t.like(await card(p.aid, c.dir), { extended: 'ok' });
  return { net, p, c, provider, reader };
}

test('SPEC §7: a contact credential expires 30 days after issue; then a free provider is no longer contacted', async (t) => {
  const setup = await listedReader(t, 'trust');
  const { net, p, c, reader } = setup;
  let { provider } = setup;
  await provider.close();
  await net.configure(p.dir, allowOnlyProvider(undefined));
  provider = await net.start(p.dir);
  net.clock.advance(61_000);
  const free = await card(p.aid, c.dir);
  t.like(free, { charge: 'free', extended: 'ok' }, 'the credential alone is reason to fetch');
  t.deepEqual(free.prices, [{ skillId: 'secret.tool', amount: '7' }]);
  // That reply re-issued the credential: 30 days from now.
  net.clock.advance(30 * 24 * 3_600_000 - 1_000);
  t.true(await reader.node.fetcher.credentialFrom(p.aid), 'valid until exp');
  net.clock.advance(2_000);
  const before = net.envelopes();
  t.like(await card(p.aid, c.dir), { extended: 'not_applicable' });
  t.is(net.envelopes(), before);
  t.false(await reader.node.fetcher.credentialFrom(p.aid));
});

/** Waits until the provider has opened `count` messages in all and journaled their limiter decisions. */
async function processed(provider: Daemon, count: number): Promise<void> {
  await until(() => (provider.node.relayStatus()?.received ?? 0) >= count, `${count} messages at the provider`);
  await provider.node.host!.idle();
}

const lastDecision = async (provider: Daemon, sender: string) =>
  ((await provider.node.host!.state(`reply-limiter/${sender}`))!.context as BucketContext).last;

test('SPEC §6.2: a provider answers one sender at most 6 card requests per 60 s, then gives no answer', async (t) => {
  const net = await startNet(t);
  const p = await net.node('p', providerConfig([{ id: 'text.translate', price: 3 }]));
  let provider = await net.start(p.dir);
  const x = await rawPeer(t, net, 'x');
  for (let i = 0; i < 7; i++) await x.messenger.send(p.aid, CARD_REQUEST, toBody({ kind: 'general', rid: `r${i}` }));
  await until(() => x.received.length >= 6, 'six replies');
  await processed(provider, 7);
  const seventh = (await lastDecision(provider, x.aid)) as { admitted: false; retryAfterMs: number };
  t.false(seventh.admitted);
  t.deepEqual(x.received.map((m) => m.body.rid).sort(), ['r0', 'r1', 'r2', 'r3', 'r4', 'r5'], 'the seventh gets no answer');
  // The window is journaled: a restarted provider still does not answer inside it.
  await provider.close();
  provider = await net.start(p.dir);
  await x.messenger.send(p.aid, CARD_REQUEST, toBody({ kind: 'general', rid: 'after-restart' }));
  await processed(provider, 1);
  const eighth = (await lastDecision(provider, x.aid)) as { admitted: false; retryAfterMs: number };
  t.false(eighth.admitted);
  t.true(eighth.retryAfterMs < seventh.retryAfterMs, 'a new refusal, later in the same window');
  t.is(x.received.length, 6, 'still no answer after a restart');
  net.clock.advance(60_000);
  await x.messenger.send(p.aid, CARD_REQUEST, toBody({ kind: 'general', rid: 'later' }));
  await until(() => x.received.length === 7, 'an answer once the window moved on');
  t.is(x.received[6]!.body.rid, 'later');
});

test("SPEC §6.3 row 4: a reader whose AID is past the provider's six per minute gets card_unavailable", async (t) => {
  const net = await startNet(t);
  const p = await net.node('p', providerConfig([{ id: 'text.translate', price: 3 }]));
  const c = await net.node('c');
  await net.start(p.dir);
  await net.start(c.dir);
  // Six requests under c's own AID (sent with its keys from elsewhere): the provider's window for c is full.
  const asC = await rawPeer(t, net, 'as-c', { identityOf: c.dir });
  const sent = net.envelopes();
  for (let i = 0; i < 6; i++) await asC.messenger.send(p.aid, CARD_REQUEST, toBody({ kind: 'general', rid: `flood${i}` }));
  await until(() => net.envelopes() - sent === 12, 'six requests and six replies');
  const pending = card(p.aid, c.dir);
  await until(() => net.envelopes() - sent === 13, "the reader's request");
  net.clock.advance(10_000);
  t.like(await pending, { verified: true, extended: null, reason: 'card_unavailable' });
  t.is(net.envelopes() - sent, 13, 'no answer to the seventh');
});

test('SPEC §6.3 row 5: an extended card whose signature fails is not used: card_signature_invalid', async (t) => {
  const net = await startNet(t);
  const m = await net.node('m', providerConfig([{ id: 'text.translate', price: 3 }]));
  const c = await net.node('c');
  const mallory = await net.start(m.dir);
  await net.start(c.dir);
  // The provider's own parts sign a real extended card; this one lowers the price after signing.
  const messenger = await mallory.node.network();
  // biome-ignore lint/complexity/useLiteralKeys: the handler table is private; the test wraps the honest handler
  const honest = messenger['handlers'].get(CARD_REQUEST)!;
  messenger.on(CARD_REQUEST, async (req) => {
    const send = messenger.send.bind(messenger);
    messenger.send = (to, type, body, o) => {
      const b = body as Map<string, unknown>;
      b.set('card', String(b.get('card')).replace('"amount":"3"', '"amount":"1"'));
      return send(to, type, b as never, o);
    };
    try {
      await honest(req);
    } finally {
      messenger.send = send;
    }
  });
  const view = await card(m.aid, c.dir);
  t.like(view, { verified: true, extended: null, reason: 'card_signature_invalid', prices: null });
  t.regex(view.explanation, /failed its signature/);
  t.false(JSON.stringify(view.card).includes('anet-price'), 'the public card is shown');
});

test("SPEC §2.1 allow_only, §5.3: a stranger's list request gets byte for byte what it would get if the capability did not exist", async (t) => {
  const net = await startNet(t);
  const p = await net.node('p', allowOnlyProvider(3));
  let provider = await net.start(p.dir);
  const x = await rawPeer(t, net, 'x');
  await x.messenger.send(p.aid, CARD_REQUEST, toBody({ kind: 'list', rid: 'with-hidden' }));
  await until(() => x.received.length === 1, 'a reply');
  // Stopped only once it acknowledged the request: a node stopped while its handler still waits for the
  // hub to take the reply (which may reach x first) is pushed the request again and replies again.
  await until(async () => (await net.hub.storage.mailbox.list(p.aid, net.clock.now())).length === 0, 'the request acknowledged');
  await provider.close();
  await net.configure(p.dir, providerConfig([{ id: 'text.translate', price: 3 }]));
  provider = await net.start(p.dir);
  await x.messenger.send(p.aid, CARD_REQUEST, toBody({ kind: 'list', rid: 'without' }));
  await until(() => x.received.length === 2, 'a reply');
  const [a, b] = x.received.map((r) => r.body.card as string);
  t.true(a!.includes('text.translate'));
  // Removing the hidden capability changed the list card, so the public card has a new seq (SPEC §5.1):
  // apart from that version stamp (and the signature over it) the stranger's replies are the same bytes.
  t.is(BigInt(publicSeqOf(JSON.parse(b!))!), BigInt(publicSeqOf(JSON.parse(a!))!) + 1n);
  t.is(unstamped(a!), unstamped(b!), 'byte-identical but for the version stamp');
  t.false(a!.includes('secret.tool'));
  t.is(x.received[0]!.body.credential, undefined, 'no credential for a stranger');
  t.is(x.received[0]!.type, CARD_REPLY);
  // A denied peer learns nothing more, and nothing less, than a stranger (SPEC §4 rule 1).
  t.is((await runCli(['deny', 'add', x.aid, '--data', p.dir])).code, 0);
  await x.messenger.send(p.aid, CARD_REQUEST, toBody({ kind: 'list', rid: 'denied' }));
  await until(() => x.received.length === 3, 'a reply');
  t.is(x.received[2]!.body.card, b, 'the same bytes as a stranger now gets');
});

test('SPEC §6.2, §14: the 24 h cache and the 60 s guard are journaled states that hold across a restart of the reader', async (t) => {
  const net = await startNet(t);
  const p = await net.node('p', providerConfig([{ id: 'text.translate', price: 3 }]));
  const c = await net.node('c');
  await net.start(p.dir);
  let reader = await net.start(c.dir);
  t.like(await card(p.aid, c.dir), { extended: 'ok' });
  await reader.close();
  reader = await net.start(c.dir);
  const before = net.envelopes();
  t.like(await card(p.aid, c.dir), { extended: 'ok' }, 'served from the restored cache');
  t.is(net.envelopes(), before);
  const state = await reader.node.host!.state(actorOf(p.aid, 'general'));
  t.is(state!.value, 'cached');
  net.clock.advance(24 * 3_600_000);
  const after = await card(p.aid, c.dir);
  t.like(after, { extended: 'ok' });
  t.is(net.envelopes() - before, 2, 'after 24 h the card is fetched again');
  t.true(
    (await reader.node.host!.state(actorOf(p.aid, 'general')))!.context.lastAttemptAt > (state!.context as CardFetchContext).lastAttemptAt!,
  );
});

/** A card's JSON with its anet-card stamp (seq, issue times) and signatures blanked. */
function unstamped(wire: string): string {
  return wire
    .replace(/"seq":"\d+","issuedAt":"\d+","notBefore":"\d+"/, '"seq":"","issuedAt":"","notBefore":""')
    .replace(/"signatures":\[.*\]/, '"signatures":[]');
}

/** The seq of the public card the hub holds for `aid`. */
async function hubSeq(net: Net, aid: string): Promise<string> {
  return publicSeqOf(JSON.parse(await new HubClient(net.hub.url).card(aid)))!;
}

test('SPEC §5.1, §6.2: a price change is a new card version (no price on the public card); a reader holding the old prices fetches the new at once', async (t) => {
  const net = await startNet(t);
  const p = await net.node('p', providerConfig([{ id: 'text.translate', price: 3 }]));
  const c = await net.node('c');
  let provider = await net.start(p.dir);
  await net.start(c.dir);
  t.deepEqual((await card(p.aid, c.dir)).prices, [{ skillId: 'text.translate', amount: '3' }]);
  const first = await hubSeq(net, p.aid);
  await provider.close();
  provider = await net.start(p.dir);
  t.is(await hubSeq(net, p.aid), first, 'a restart with the same prices keeps the seq');
  await provider.close();
  await net.configure(p.dir, providerConfig([{ id: 'text.translate', price: 4 }]));
  await net.start(p.dir);
  const second = await hubSeq(net, p.aid);
  t.is(BigInt(second), BigInt(first) + 1n);
  const wire = await new HubClient(net.hub.url).card(p.aid);
  t.false(wire.includes(EXT_PRICE), 'the public card still carries no price');
  const before = net.envelopes();
  const view = await card(p.aid, c.dir); // well inside 60 s of the first fetch
  t.like(view, { extended: 'ok', reason: null, stale: false });
  t.deepEqual(view.prices, [{ skillId: 'text.translate', amount: '4' }]);
  t.is(publicSeqOf(view.card), second);
  t.is(net.envelopes() - before, 2, 'asked at once: a new seq is a new card');
});

test('SPEC §6.2, §6.3, §14: when the newest card cannot be had, the last signed one is shown (stale); the guard is a journaled state in anet replay, restored after a restart', async (t) => {
  const net = await startNet(t);
  const p = await net.node('p', providerConfig([{ id: 'text.translate', price: 3 }]));
  const c = await net.node('c');
  const provider = await net.start(p.dir);
  let reader = await net.start(c.dir);
  t.like(await card(p.aid, c.dir), { extended: 'ok' });
  // The provider changes its price and publishes, but its daemon is not running to answer.
  await provider.close();
  await net.configure(p.dir, providerConfig([{ id: 'text.translate', price: 5 }]));
  t.is((await runCli(['hub-register', '--name', 'p', '--data', p.dir])).code, 0);
  const before = net.envelopes();
  const pending = card(p.aid, c.dir);
  await until(() => net.envelopes() - before === 1, 'the request for the new card');
  net.clock.advance(10_000);
  const stale = await pending;
  t.like(stale, { extended: 'ok', reason: 'card_stale', stale: true, nextAttemptAt: null });
  t.deepEqual(stale.prices, [{ skillId: 'text.translate', amount: '3' }], 'what the provider last signed for us');
  t.regex(
    stale.explanation,
    /^The agent's newest extended card could not be obtained, so this is the last one it signed for you.* It extends seq 1; the agent now publishes seq 2\.$/,
  );
  const text = await runCli(['card', p.aid, '--data', c.dir]);
  t.regex(text.stdout, /text\.translate {2}3 credits\n.*Not asked again now: the agent was last asked 1\d s ago/s);
  t.is(net.envelopes() - before, 1, 'inside the guard: nothing asked');

  await reader.close();
  const replayed = await runCli(['replay', '--actor', actorOf(p.aid, 'general'), '--data', c.dir]);
  t.is(replayed.code, 0, replayed.stderr);
  t.regex(replayed.stdout, /TICK: waiting -> guarded$/m, 'the failed attempt enters the guard');
  t.regex(replayed.stdout, /NEED: guarded -> guarded$/m, 'a look inside it stays there');
  t.is((await runCli(['replay', '--verify', '--data', c.dir])).code, 0);
  reader = await net.start(c.dir);
  const restored = await reader.node.host!.state(actorOf(p.aid, 'general'));
  t.is(restored!.value, 'guarded');
  net.clock.advance(50_000);
  await until(
    async () => (await reader.node.host!.state(actorOf(p.aid, 'general')))!.value === 'idle',
    'the restored guard ends at its deadline',
  );
});

test("SPEC §11, §5.3: the hub's stored bytes never hold an extended card, a price or a message body", async (t) => {
  const net = await startNet(t);
  const p = await net.node(
    'p',
    providerConfig([
      { id: 'text.translate', price: 424242 },
      { id: 'secret.tool', price: 987654321, allow_only: true, description: 'MARKER-HIDDEN-7731' },
    ]),
  );
  const c = await net.node('c');
  t.is((await runCli(['allow', 'add', c.aid, '--data', p.dir])).code, 0);
  await net.start(p.dir);
  await net.start(c.dir);
  const listed = await card(p.aid, c.dir);
  t.deepEqual(
    listed.prices.map((x: { amount: string }) => x.amount),
    ['987654321', '424242'],
  );
  const x = await rawPeer(t, net, 'x');
  await x.messenger.send(p.aid, 'note', 'MARKER-BODY-5521');
  await x.messenger.send(p.aid, CARD_REQUEST, toBody({ kind: 'list', rid: 'MARKER-RID-9' }));
  await until(() => x.received.length === 1, 'a reply');
  await net.hub.close();
  const hubDir = join(net.root, 'hub');
  for (const marker of ['MARKER-HIDDEN-7731', '987654321', '424242', 'anet-price', 'MARKER-BODY-5521', 'MARKER-RID-9', 'secret.tool']) {
    t.deepEqual(await filesContaining(hubDir, marker), [], marker);
  }
  // The search can find such bytes: the reader's own store keeps the extended card it saw, for audit.
  t.not((await filesContaining(c.dir, 'MARKER-HIDDEN-7731')).length, 0);
});

test("SPEC §7: after a key rotation the provider renews a listed peer's credential unasked, signed with the new key", async (t) => {
  const setup = await listedReader(t, 'allow');
  const { net, p, c, reader } = setup;
  let { provider } = setup;
  await provider.close();
  const rotated = await runCli(['key', 'rotate', '--data', p.dir]);
  t.is(rotated.code, 0, rotated.stderr);
  await net.configure(p.dir, allowOnlyProvider(undefined));
  provider = await net.start(p.dir);
  // Poll without judging the held credential (an old one would be dropped as invalid now).
  const held = () => reader.node.store.contacts.get(p.aid) as Promise<Uint8Array | undefined>;
  const first = await held();
  await until(async () => Buffer.compare(Buffer.from((await held()) ?? []), Buffer.from(first ?? [])) !== 0, 'a renewed credential');
  t.notDeepEqual(await held(), first, 'a renewed credential arrived');
  t.true(await reader.node.fetcher.credentialFrom(p.aid), 'valid under the new key');
  net.clock.advance(61_000);
  const free = await card(p.aid, c.dir);
  t.like(free, { charge: 'free', extended: 'ok', key: 'confirmed' }, 'so the free provider is still fetched');
});

test('SPEC §6.4: anet card without a reader daemon registers the reader, fetches, and keeps the answer for the next run', async (t) => {
  const net = await startNet(t);
  const p = await net.node('p', providerConfig([{ id: 'text.translate', price: 3 }]));
  const c = await net.node('c');
  await net.start(p.dir);
  const first = await card(p.aid, c.dir);
  t.like(first, { extended: 'ok', code: 0 });
  t.deepEqual(first.prices, [{ skillId: 'text.translate', amount: '3' }]);
  const before = net.envelopes();
  t.like(await card(p.aid, c.dir), { extended: 'ok', fetchedAt: first.fetchedAt }, 'the journaled cache, in a new process state');
  t.is(net.envelopes(), before);
});
