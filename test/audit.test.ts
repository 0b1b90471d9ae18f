// SPEC §14 (audit): `anet audit cards` lists every card version published or seen, re-verified now —
// a card signed before a key rotation is reported as signed by that earlier key, not as a forgery —
// and `anet audit prices` shows a provider's signed prices over time and the signed card version each
// payment was checked against.
import test from 'ava';
import { runCli } from './helpers/cli.js';
import { market } from './helpers/payments.js';

test('SPEC §14: audit prices shows each signed price version and the card each payment was checked against; audit cards re-verifies across a rotation', async (t) => {
  const { net, p, c, provider: started } = await market(t, [{ id: 'text.translate', price: 3 }], { credits: '100' });
  let provider = started;
  const call = async () => JSON.parse((await runCli(['call', p.aid, 'text.translate', '--args', '{}', '--json', '--data', c.dir])).stdout);
  const first = await call();
  t.like(first, { state: 'completed', payment: { status: 'payment-completed', price: { amount: '3' } } });
  // The provider raises its price and rotates its key; a day later the caller's cache has expired.
  await provider.close();
  p.config.modules.service.capabilities[0]!.price = 5;
  await net.configure(p.dir, p.config);
  t.is((await runCli(['key', 'rotate', '--data', p.dir])).code, 0);
  provider = await net.start(p.dir);
  net.clock.advance(24 * 3_600_000 + 1);
  const second = await call();
  t.like(second, { state: 'completed', payment: { status: 'payment-completed', price: { amount: '5' } } });

  const prices = JSON.parse((await runCli(['audit', 'prices', p.aid, '--json', '--data', c.dir])).stdout);
  t.deepEqual(
    prices.skills.map((s: { skillId: string; versions: { amount: string }[] }) => [s.skillId, s.versions.map((v) => v.amount)]),
    [['text.translate', ['3', '5']]],
  );
  const [v3, v5] = prices.skills[0].versions;
  t.not(v3.digest, v5.digest);
  t.deepEqual(
    prices.payments.map((x: { task: string; amount: string; price: { digest: string } }) => [x.task, x.amount, x.price.digest]),
    [
      [first.task, '3', v3.digest],
      [second.task, '5', v5.digest],
    ],
  );
  const text = (await runCli(['audit', 'prices', p.aid, '--data', c.dir])).stdout;
  t.regex(
    text,
    new RegExp(
      `task ${second.task}  text.translate  5 credits  auto  payment-completed  hub tx_\\S+  checked against 5 credits signed in card seq \\d+ digest ${v5.digest.slice(0, 12)}`,
    ),
  );

  const cards = JSON.parse((await runCli(['audit', 'cards', p.aid, '--json', '--data', c.dir])).stdout) as {
    kind: string;
    check: string;
    source: string;
  }[];
  t.true(cards.some((r) => r.kind === 'public') && cards.some((r) => r.kind === 'extended'));
  t.true(
    cards.some((r) => r.check === 'ok, signed with key #0 (since rotated)'),
    'cards from before the rotation still verify under the key that signed them',
  );
  t.true(
    cards.some((r) => r.check === 'ok'),
    'cards after it verify under the current key',
  );
  t.false(
    cards.some((r) => !r.check.startsWith('ok')),
    'nothing seen fails',
  );
  await provider.close();
  const own = JSON.parse((await runCli(['audit', 'cards', '--json', '--data', p.dir])).stdout) as {
    aid: string;
    source: string;
    check: string;
  }[];
  t.true(own.length >= 2 && own.every((r) => r.aid === p.aid && r.source === 'self'), "the provider's own published cards");
});
