// SPEC §5.1–5.2 (the public card) and WIRE.md §3 (JCS + detached JWS, binding, verification codes).
import test from 'ava';
import * as jose from 'jose';
import { canonicalize as otherJcs } from 'json-canonicalize';
import { validateConfig } from '../../src/config/load.js';
import { buildPublicCard, cardContentKey } from '../../src/card/build.js';
import { signCard } from '../../src/protocol/card/jws.js';
import { verifyCard, type CardResult } from '../../src/protocol/card/verify.js';
import { EXT_CARD, EXT_X402, EXT_EVIDENCE, RELAY_BINDING } from '../../src/protocol/card/constants.js';
import type { AgentCard } from '../../src/protocol/card/types.js';
import { testIdentity } from '../helpers/identity.js';

const HUB = 'http://127.0.0.1:8710';
const NOW = 1_800_000_000_000;
const stamp = (seq = 1n) => ({ seq, issuedAt: NOW, notBefore: NOW });

function config(caps: { id: string; price?: number; allow_only?: boolean; extra?: object }[], policy: 'open' | 'closed' = 'closed') {
  const { config: c, problems } = validateConfig({
    hub: HUB,
    inbound: { policy, public_capabilities: caps.map((c) => ({ id: c.id, ...(c.allow_only ? { allow_only: true } : {}) })) },
    modules: {
      service: {
        capabilities: caps.map((c) => ({ id: c.id, url: `unix:///run/${c.id}.sock`, ...(c.price ? { price: c.price } : {}), ...c.extra })),
      },
    },
  });
  if (!c) throw new Error(JSON.stringify(problems));
  return c;
}

const id = testIdentity('card');
const aid = id.kel.aid;
const sign = (card: AgentCard, ksn = id.kel.ksn, key = id.keys[ksn]!) => JSON.stringify(signCard(card, key, HUB, aid, ksn));
const code = (r: CardResult) => (r.ok ? 'ok' : r.code);

test('SPEC §5.1: skills sorted by id, defaults name = description = id and tags = [id], chat when open, never a price', (t) => {
  const card = buildPublicCard(
    config(
      [
        { id: 'text.translate', price: 3, extra: { name: 'Translate', tags: ['lang'] } },
        { id: 'a.first' },
        { id: 'hidden', allow_only: true },
      ],
      'open',
    ),
    {},
    aid,
    stamp(),
  )!;
  t.deepEqual(
    card.skills.map((s) => s.id),
    ['a.first', 'chat', 'text.translate'],
  );
  t.deepEqual(card.skills[0], { id: 'a.first', name: 'a.first', description: 'a.first', tags: ['a.first'] });
  t.like(card.skills[2], { name: 'Translate', description: 'text.translate', tags: ['lang'] });
  t.is(card.name, `anet agent ${aid.slice(0, 12)}`);
  t.deepEqual(card.supportedInterfaces, [{ url: `${HUB}/relay/v2`, protocolBinding: RELAY_BINDING, protocolVersion: '1.0', tenant: aid }]);
  t.true(card.capabilities.extendedAgentCard);
  t.notRegex(JSON.stringify(card), /anet-price|"amount"|"price"/, 'no price on the public card');
  t.false(JSON.stringify(card).includes('hidden'), 'allow_only never on the public card');
  const uris = card.capabilities.extensions.map((e) => e.uri);
  t.deepEqual(uris, [EXT_CARD, EXT_EVIDENCE, EXT_X402]);
  t.deepEqual(card.capabilities.extensions[0]!.params, { aid, seq: '1', issuedAt: String(NOW), notBefore: String(NOW) });
});

test('SPEC §5.2: a2a-x402 appears when a listed skill is priced, required only when every listed skill is', (t) => {
  const x402 = (c: AgentCard | null) => c!.capabilities.extensions.find((e) => e.uri === EXT_X402);
  t.is(x402(buildPublicCard(config([{ id: 'a' }, { id: 'b' }]), {}, aid, stamp())), undefined);
  t.false(x402(buildPublicCard(config([{ id: 'a', price: 1 }, { id: 'b' }]), {}, aid, stamp()))!.required);
  t.true(
    x402(
      buildPublicCard(
        config([
          { id: 'a', price: 1 },
          { id: 'b', price: 2 },
        ]),
        {},
        aid,
        stamp(),
      ),
    )!.required,
  );
  t.false(x402(buildPublicCard(config([{ id: 'a', price: 1 }], 'open'), {}, aid, stamp()))!.required, 'never required with chat listed');
  // A priced allow_only skill is not listed, so it neither adds nor requires x402.
  t.true(
    x402(
      buildPublicCard(
        config([
          { id: 'a', price: 1 },
          { id: 'b', price: 5, allow_only: true },
        ]),
        {},
        aid,
        stamp(),
      ),
    )!.required,
  );
});

test('SPEC §5.1: no card when nothing is offered and the policy is closed', (t) => {
  t.is(buildPublicCard(config([]), {}, aid, stamp()), null);
  t.is(buildPublicCard(config([{ id: 'x', allow_only: true }]), {}, aid, stamp()), null);
  t.not(buildPublicCard(config([], 'open'), {}, aid, stamp()), null);
});

test('SPEC §5.1: the same content gives the same content key whatever the seq; new content a new key', (t) => {
  const c = config([{ id: 'a' }]);
  t.is(
    cardContentKey(buildPublicCard(c, {}, aid, stamp(1n))!),
    cardContentKey(buildPublicCard(c, {}, aid, { seq: 2n, issuedAt: 5, notBefore: 5 })!),
  );
  t.not(cardContentKey(buildPublicCard(c, {}, aid, stamp())!), cardContentKey(buildPublicCard(c, { name: 'other' }, aid, stamp())!));
});

test('WIRE §3: a signed card verifies, and an independent JCS + JOSE implementation accepts the signature', async (t) => {
  const card = buildPublicCard(config([{ id: 'a', price: 2 }]), { name: 'translator' }, aid, stamp())!;
  const wire = sign(card);
  const r = verifyCard(wire, { kel: id.kel, now: NOW });
  t.is(code(r), 'ok');
  const parsed = JSON.parse(wire);
  const [sig] = parsed.signatures;
  delete parsed.signatures;
  const jwk = { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(id.kel.currentKey).toString('base64url') };
  const key = await jose.importJWK(jwk, 'EdDSA');
  const out = await jose.flattenedVerify(
    { protected: sig.protected, payload: Buffer.from(otherJcs(parsed)).toString('base64url'), signature: sig.signature },
    key,
  );
  t.deepEqual(out.protectedHeader, { alg: 'EdDSA', jku: `${HUB}/agents/${aid}/jwks.json`, kid: `did:anet:${aid}#0`, typ: 'JOSE' });
});

test('WIRE §3.4: a hub that alters a skill, a field or the seq is caught (INVALID_SIGNATURE)', (t) => {
  const wire = sign(buildPublicCard(config([{ id: 'a' }, { id: 'b' }]), {}, aid, stamp(4n))!);
  const tamper = (fn: (c: any) => void) => {
    const c = JSON.parse(wire);
    fn(c);
    return code(verifyCard(JSON.stringify(c), { kel: id.kel, now: NOW }));
  };
  t.is(
    tamper((c) => (c.skills[0].description = 'something else')),
    'INVALID_SIGNATURE',
  );
  t.is(
    tamper((c) => c.skills.pop()),
    'INVALID_SIGNATURE',
  );
  t.is(
    tamper((c) => (c.name = 'evil')),
    'INVALID_SIGNATURE',
  );
  t.is(
    tamper((c) => (c.capabilities.extensions[0].params.seq = '5')),
    'INVALID_SIGNATURE',
  );
  t.is(
    tamper((c) => (c.capabilities.streaming = true)),
    'INVALID_SIGNATURE',
  );
  // Re-serialising with other whitespace or key order is fine: the payload is canonical.
  t.is(code(verifyCard(JSON.stringify(JSON.parse(wire), null, 2), { kel: id.kel, now: NOW })), 'ok');
});

test('WIRE §3.4: a card signed before a rotation is refused after it (KEY_NOT_CURRENT)', (t) => {
  const rotated = testIdentity('card', 1);
  t.is(rotated.kel.aid, aid);
  const before = sign(buildPublicCard(config([{ id: 'a' }]), {}, aid, stamp())!, 0, id.keys[0]);
  t.is(code(verifyCard(before, { kel: id.kel, now: NOW })), 'ok');
  t.is(code(verifyCard(before, { kel: rotated.kel, now: NOW })), 'KEY_NOT_CURRENT');
  const after = sign(buildPublicCard(config([{ id: 'a' }]), {}, aid, stamp(2n))!, 1, rotated.keys[1]);
  t.is(code(verifyCard(after, { kel: rotated.kel, now: NOW })), 'ok');
  t.is(code(verifyCard(after, { kel: id.kel, now: NOW })), 'KEY_NOT_CURRENT', 'a ksn beyond the KEL');
  // The old key claiming the new ksn does not verify.
  t.is(
    code(verifyCard(sign(buildPublicCard(config([{ id: 'a' }]), {}, aid, stamp(3n))!, 1, id.keys[0]), { kel: rotated.kel, now: NOW })),
    'INVALID_SIGNATURE',
  );
});

test('WIRE §3.4: every other code', (t) => {
  const base = buildPublicCard(config([{ id: 'a' }]), {}, aid, stamp(7n))!;
  const ok = sign(base);
  const v = (wire: string, opts = {}) => code(verifyCard(wire, { kel: id.kel, now: NOW, ...opts }));
  const mutate = (fn: (c: any) => void, resign = true) => {
    const c = JSON.parse(JSON.stringify(base));
    fn(c);
    return resign ? sign(c) : JSON.stringify(c);
  };
  t.is(v(JSON.stringify({ ...JSON.parse(ok), signatures: [] })), 'UNSIGNED');
  t.is(v(mutate(() => {}, false)), 'UNSIGNED');
  t.is(v('{"name": "a", "name": "b"}'), 'MALFORMED_JSON');
  t.is(v('not json'), 'MALFORMED_JSON');
  for (const seq of ['01', '+1', '1.0', '18446744073709551616'])
    t.is(v(mutate((c) => (c.capabilities.extensions[0].params.seq = seq))), 'INVALID_CARD', seq);
  t.is(v(ok.replace('"seq":"7"', '"seq":7')), 'INVALID_CARD', 'a JSON number');
  t.is(v(mutate((c) => (c.skills[0].tags = []))), 'INVALID_CARD');
  t.is(v(mutate((c) => (c.capabilities.pushNotifications = 'no'))), 'INVALID_CARD', 'an optional flag, when present, is a boolean');
  t.is(v(mutate((c) => delete c.capabilities.extendedAgentCard)), 'ok', 'optional in A2A: a build rule of ours, not a read rule');
  const header = (h: object) => {
    const c = JSON.parse(ok);
    c.signatures[0].protected = Buffer.from(JSON.stringify(h)).toString('base64url');
    return JSON.stringify(c);
  };
  t.is(v(header({ alg: 'ES256', kid: `did:anet:${aid}#0` })), 'BAD_SIGNATURE_HEADER');
  t.is(v(header({ alg: 'EdDSA', kid: `did:anet:${aid}#00` })), 'BAD_SIGNATURE_HEADER');
  t.is(v(header({ alg: 'EdDSA', kid: `did:web:${aid}#0` })), 'BAD_SIGNATURE_HEADER');
  t.is(
    v(
      JSON.stringify({
        ...JSON.parse(ok),
        signatures: [{ ...JSON.parse(ok).signatures[0], signature: `${JSON.parse(ok).signatures[0].signature}=` }],
      }),
    ),
    'BAD_SIGNATURE_HEADER',
  );
  const other = testIdentity('other');
  t.is(v(mutate((c) => (c.supportedInterfaces[0].tenant = other.kel.aid))), 'BINDING_MISMATCH');
  t.is(v(JSON.stringify(signCard(base, other.keys[0]!, HUB, other.kel.aid, 0))), 'BINDING_MISMATCH');
  t.is(v(ok, { kel: null }), 'KEL_UNAVAILABLE');
  t.is(v(ok, { kel: other.kel }), 'UNKNOWN_AID');
  t.is(v(ok, { kel: 'invalid' }), 'UNKNOWN_AID');
  t.is(v(mutate((c) => (c.capabilities.extensions[0].params.notBefore = String(NOW + 300_001)))), 'CARD_NOT_YET_VALID');
  t.is(v(mutate((c) => (c.capabilities.extensions[0].params.notBefore = String(NOW + 300_000)))), 'ok', 'the 300 s skew is inclusive');
  t.is(v(mutate((c) => (c.name = 'x'.repeat(129)))), 'CARD_TOO_LARGE');
  t.is(v(mutate((c) => (c.name = 'x'.repeat(128)))), 'ok');
  t.is(v(mutate((c) => (c.skills[0].tags = Array.from({ length: 17 }, (_, i) => `t${i}`)))), 'CARD_TOO_LARGE');
  t.is(v(mutate((c) => (c.description = 'd'.repeat(4097)))), 'CARD_TOO_LARGE');
  t.is(
    v(mutate((c) => (c.skills = Array.from({ length: 257 }, (_, i) => ({ id: `s${i}`, name: 's', description: 's', tags: ['s'] }))))),
    'CARD_TOO_LARGE',
  );
  t.is(v(JSON.stringify({ ...JSON.parse(ok), signatures: Array(9).fill(JSON.parse(ok).signatures[0]) })), 'CARD_TOO_LARGE');
  const r = verifyCard(ok, { kel: id.kel, now: NOW });
  if (!r.ok) return t.fail();
  t.is(v(ok, { highWater: { seq: 8n, digest: 'x' } }), 'SEQ_ROLLBACK');
  t.is(v(ok, { highWater: { seq: 7n, digest: 'x' } }), 'SEQ_FORK');
  t.is(v(ok, { highWater: { seq: 7n, digest: r.digest } }), 'ok');
  t.is(v(ok, { highWater: { seq: 6n, digest: 'x' } }), 'ok');
});
