// SPEC §5.3–5.4: extended cards general and list, the anet-price extension, not_configured.
import test from 'ava';
import { validateConfig } from '../../src/config/load.js';
import { buildPublicCard } from '../../src/card/build.js';
import { buildExtendedCard, pricesOf } from '../../src/card/extended.js';
import { signCard } from '../../src/protocol/card/jws.js';
import { verifyCard } from '../../src/protocol/card/verify.js';
import { EXT_CARD, EXT_PRICE } from '../../src/protocol/card/constants.js';
import type { AgentCard } from '../../src/protocol/card/types.js';
import { testIdentity } from '../helpers/identity.js';

const id = testIdentity('ext');
const HUB_AID = testIdentity('hub').kel.aid;
const stamp = { seq: 4n, issuedAt: 10, notBefore: 10 };

function config(caps: { id: string; price?: number | bigint; allow_only?: boolean }[], policy: 'open' | 'closed' = 'closed') {
  return validateConfig({
    inbound: { policy, public_capabilities: caps.map((c) => ({ id: c.id, allow_only: c.allow_only ?? false })) },
    modules: {
      service: {
        capabilities: caps.map((c) => ({
          id: c.id,
          url: `unix:///run/${c.id}.sock`,
          ...(c.price !== undefined ? { price: c.price } : {}),
        })),
      },
    },
  }).config!;
}

const ext = (c: AgentCard | 'not_configured') =>
  c === 'not_configured' ? null : c.capabilities.extensions.find((e) => e.uri === EXT_PRICE)!.params;

test('SPEC §5.3: general = public card + prices of priced skills; list adds allow_only skills and their prices', (t) => {
  const c = config([
    { id: 'b.free' },
    { id: 'a.paid', price: 3 },
    { id: 'z.secret', price: 9, allow_only: true },
    { id: 'y.hidden', allow_only: true },
  ]);
  const pub = buildPublicCard(c, {}, id.kel.aid, stamp)!;
  const general = buildExtendedCard(c, {}, id.kel.aid, stamp, 'general', HUB_AID) as AgentCard;
  t.deepEqual(general.skills, pub.skills);
  t.deepEqual(ext(general), { network: `hub:${HUB_AID}`, asset: 'credit', prices: [{ skillId: 'a.paid', amount: '3' }] });
  const list = buildExtendedCard(c, {}, id.kel.aid, stamp, 'list', HUB_AID) as AgentCard;
  t.deepEqual(
    list.skills.map((s) => s.id),
    ['a.paid', 'b.free', 'y.hidden', 'z.secret'],
  );
  t.deepEqual(ext(list), {
    network: `hub:${HUB_AID}`,
    asset: 'credit',
    prices: [
      { skillId: 'a.paid', amount: '3' },
      { skillId: 'z.secret', amount: '9' },
    ],
  });
  // The same anet-card values as the public card it extends.
  const stampOf = (card: AgentCard) => card.capabilities.extensions.find((e) => e.uri === EXT_CARD)!.params;
  t.deepEqual(stampOf(general), stampOf(pub));
  t.deepEqual(stampOf(list), stampOf(pub));
  t.false(JSON.stringify(general).includes('z.secret'), 'allow_only never on the general card');
  const price = ext(general)!.prices as unknown[];
  t.is(price.length, 1);
  t.is(JSON.stringify(pub).includes(EXT_PRICE), false);
});

test('SPEC §5.3: not_configured when the kind adds nothing: no price, no extra skill', (t) => {
  t.is(buildExtendedCard(config([{ id: 'a' }, { id: 'b' }]), {}, id.kel.aid, stamp, 'general', HUB_AID), 'not_configured');
  t.is(buildExtendedCard(config([{ id: 'a' }]), {}, id.kel.aid, stamp, 'list', HUB_AID), 'not_configured');
  const onlyHidden = config([{ id: 'a' }, { id: 'h', allow_only: true }]);
  t.is(buildExtendedCard(onlyHidden, {}, id.kel.aid, stamp, 'general', HUB_AID), 'not_configured');
  t.not(buildExtendedCard(onlyHidden, {}, id.kel.aid, stamp, 'list', HUB_AID), 'not_configured');
});

test('SPEC §5.4: amounts are canonical decimals 1..2^63−1 and survive signing exactly; readers refuse anything else', (t) => {
  const max = (1n << 63n) - 1n;
  const card = buildExtendedCard(config([{ id: 'big', price: max }]), {}, id.kel.aid, stamp, 'general', HUB_AID) as AgentCard;
  const wire = JSON.stringify(signCard(card, id.keys[0]!, 'http://hub', id.kel.aid, 0));
  const r = verifyCard(wire, { kel: id.kel, now: 100 });
  t.true(r.ok);
  if (!r.ok) return;
  t.deepEqual(pricesOf(r.card), { network: `hub:${HUB_AID}`, asset: 'credit', prices: [{ skillId: 'big', amount: max.toString() }] });
  const withAmount = (amount: unknown, more: object[] = []) => {
    const c = structuredClone(card);
    (c.capabilities.extensions.find((e) => e.uri === EXT_PRICE)!.params as { prices: unknown[] }).prices = [
      { skillId: 'big', amount },
      ...more,
    ];
    return pricesOf(c);
  };
  for (const bad of ['0', '01', '+1', '1e3', '1.0', (max + 1n).toString(), 3, '-1'])
    t.true('error' in withAmount(bad), `amount ${String(bad)}`);
  t.true('error' in withAmount('5', [{ skillId: 'a', amount: '1' }]), 'unsorted');
  t.false('error' in withAmount('5', [{ skillId: 'c', amount: '1' }]));
});
