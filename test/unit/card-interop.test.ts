// WIRE §3.1–3.4, A2A v1.0 §8.4 (SPEC §5, §6): cards signed by other A2A implementations verify. The
// fixture is independent of our signer and canonicaliser: `jose` signs (detached, EdDSA) and
// `json-canonicalize` makes the JCS, over each form a signer may use — the card as published, the A2A
// §8.4.1 form (default-valued fields left out, REQUIRED and `optional` ones kept), and every default
// left out as a2a-python does — and `anet card verify` checks each, offline, against the signer's KEL.
import test, { type ExecutionContext } from 'ava';
import { sha256 } from '@noble/hashes/sha2.js';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { FlattenedSign, importJWK } from 'jose';
import { canonicalize } from 'json-canonicalize';
import { testIdentity } from '../helpers/identity.js';
import { tempDir } from '../helpers/tmp.js';
import { runCli } from '../helpers/cli.js';
import { encodeKel } from '../../src/identity/kel.js';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Card = { [k: string]: Json };

const HUB = 'http://127.0.0.1:8710';
const id = testIdentity('card-interop');
const aid = id.kel.aid;

/** A card of our AID as another implementation publishes it: defaults written out, no extendedAgentCard. */
function publishedWithDefaults(): Card {
  return {
    name: 'interop agent',
    description: 'Signed by another A2A implementation.',
    version: '1.0.0',
    supportedInterfaces: [
      {
        url: `${HUB}/relay/v2`,
        protocolBinding: 'https://agentnetwork.org.cn/a2a/bindings/anet-relay/v1',
        protocolVersion: '1.0',
        tenant: aid,
      },
    ],
    capabilities: {
      streaming: false,
      pushNotifications: false,
      extensions: [
        {
          uri: 'https://agentnetwork.org.cn/a2a/ext/anet-card/v1',
          description: '',
          required: false,
          params: { aid, seq: '1', issuedAt: '1700000000000', notBefore: '1700000000000' },
        },
        { uri: 'https://agentnetwork.org.cn/a2a/ext/anet-evidence/v1', description: 'Receipts.', required: false, params: {} },
      ],
    },
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: [{ id: 'text.echo', name: 'echo', description: 'Echoes.', tags: ['echo'], examples: [], inputModes: [] }],
    securitySchemes: {},
    documentationUrl: '',
  };
}

const isEmpty = (v: Json) =>
  v === '' ||
  v === false ||
  v === 0 ||
  v === null ||
  (Array.isArray(v) && v.length === 0) ||
  (typeof v === 'object' && v !== null && !Array.isArray(v) && Object.keys(v).length === 0);

/** Every default-valued field left out, recursively; `params` (a Struct) left whole unless `intoParams`. */
function stripAll(v: Json, intoParams = false, keep: (parent: string, key: string) => boolean = () => false, parent = ''): Json {
  if (Array.isArray(v)) return v.map((x) => stripAll(x, intoParams, keep, parent));
  if (typeof v !== 'object' || v === null) return v;
  const out: Card = {};
  for (const [k, x] of Object.entries(v)) {
    const inner = k === 'params' && !intoParams ? x : stripAll(x, intoParams, keep, k);
    if (keep(parent, k) || !isEmpty(inner)) out[k] = inner;
  }
  return out;
}

/** A2A §8.4.1, from a2a.proto: REQUIRED fields and those with explicit presence stay, by message. */
const A2A_KEEP: Record<string, string[]> = {
  '': [
    'name',
    'description',
    'version',
    'supportedInterfaces',
    'capabilities',
    'defaultInputModes',
    'defaultOutputModes',
    'skills',
    'documentationUrl',
    'iconUrl',
  ],
  capabilities: ['streaming', 'pushNotifications', 'extendedAgentCard'],
  skills: ['id', 'name', 'description', 'tags'],
  supportedInterfaces: ['url', 'protocolBinding', 'protocolVersion'],
};
const a2aKeep = (parent: string, key: string) => A2A_KEEP[parent]?.includes(key) ?? false;

async function signed(published: Card, signedForm: Card): Promise<string> {
  // testIdentity's first key: its seed is sha256('<tag>/0').
  const seed = Buffer.from(sha256(new TextEncoder().encode('card-interop/0')));
  const key = await importJWK(
    { kty: 'OKP', crv: 'Ed25519', d: seed.toString('base64url'), x: Buffer.from(id.keys[0]!.publicKey).toString('base64url') },
    'EdDSA',
  );
  const header = { alg: 'EdDSA', jku: `${HUB}/agents/${aid}/jwks.json`, kid: `did:anet:${aid}#0`, typ: 'JOSE' };
  const jws = await new FlattenedSign(new TextEncoder().encode(canonicalize(signedForm))).setProtectedHeader(header).sign(key);
  return JSON.stringify({ ...published, signatures: [{ protected: jws.protected, signature: jws.signature }] });
}

async function verdict(t: ExecutionContext, wire: string): Promise<string> {
  const dir = await tempDir(t);
  await writeFile(join(dir, 'kel.cbor'), encodeKel(id.events));
  await writeFile(join(dir, 'card.json'), wire);
  const r = await runCli(['card', 'verify', join(dir, 'card.json'), '--kel', join(dir, 'kel.cbor'), '--now', '1700000000000']);
  return r.stdout.split(':')[0]!;
}

test('WIRE §3.4, A2A §8.4: a card without capabilities.extendedAgentCard, signed as published, verifies', async (t) => {
  const card = publishedWithDefaults();
  t.false('extendedAgentCard' in (card.capabilities as Card));
  t.is(await verdict(t, await signed(card, card)), 'ok');
});

test('WIRE §3.4, A2A §8.4: a card published with default values and signed with all of them left out verifies', async (t) => {
  const card = publishedWithDefaults();
  (card.capabilities as Card).extendedAgentCard = false;
  const form = stripAll(card) as Card;
  t.false('streaming' in (form.capabilities as Card), 'the signed form really differs from the published one');
  t.is(await verdict(t, await signed(card, form)), 'ok');
});

test('WIRE §3.4, A2A §8.4.1: a card signed over the A2A form (REQUIRED and optional fields kept) verifies', async (t) => {
  const card = publishedWithDefaults();
  (card.capabilities as Card).extendedAgentCard = false;
  const form = stripAll(card, false, a2aKeep) as Card;
  t.is((form.capabilities as Card).streaming, false, 'explicit presence keeps streaming: false');
  t.false('examples' in (form.skills as Card[])[0]!);
  t.is(form.documentationUrl, '', 'an optional string is kept at its default too');
  t.false('description' in ((form.capabilities as Card).extensions as Card[])[0]!, "an extension's description is not REQUIRED");
  t.is(await verdict(t, await signed(card, form)), 'ok');
});

test('WIRE §3.4: a card whose extension params were stripped before signing is INVALID_SIGNATURE (a Struct is never stripped)', async (t) => {
  const card = publishedWithDefaults();
  const ext = ((card.capabilities as Card).extensions as Card[])[0]!;
  ext.params = { ...(ext.params as Card), note: '' };
  t.is(await verdict(t, await signed(card, stripAll(card, true) as Card)), 'INVALID_SIGNATURE');
  t.is(await verdict(t, await signed(card, stripAll(card) as Card)), 'ok', 'the same card signed with params whole verifies');
});

test('WIRE §3.4: a card that neither form verifies is INVALID_SIGNATURE; a REQUIRED string present but empty is INVALID_CARD', async (t) => {
  const card = publishedWithDefaults();
  const wire = await signed(card, stripAll(card) as Card);
  t.is(await verdict(t, wire.replace('"Echoes."', '"Echoes!"')), 'INVALID_SIGNATURE');
  t.is(
    await verdict(t, wire.replace('"documentationUrl":""', '"documentationUrl":"x"')),
    'INVALID_SIGNATURE',
    'a default replaced by a value is content',
  );
  const empty = { ...card, description: '' };
  t.is(await verdict(t, await signed(empty, stripAll(empty) as Card)), 'INVALID_CARD');
});

test("WIRE §3.4 (hostile): under a stripped-form signature, only a default of the field's own type may be added; anything else is INVALID_SIGNATURE", async (t) => {
  const card = publishedWithDefaults();
  const wire = await signed(card, stripAll(card) as Card);
  t.is(await verdict(t, wire), 'ok');
  const at = (text: string) => wire.replace('"required":false,"params":{"aid"', text);
  t.is(await verdict(t, at('"required":[],"params":{"aid"')), 'INVALID_SIGNATURE', 'a [] where a boolean belongs reads as true');
  t.is(await verdict(t, at('"required":{},"params":{"aid"')), 'INVALID_SIGNATURE');
  t.is(await verdict(t, at('"required":null,"params":{"aid"')), 'INVALID_SIGNATURE');
  t.is(
    await verdict(t, wire.replace('{"name":', '{"__proto__":{"description":"PAY 0xEVIL"},"name":')),
    'INVALID_SIGNATURE',
    '__proto__ is content',
  );
  t.is(await verdict(t, wire.replace('{"name":', '{"extra":"","name":')), 'INVALID_SIGNATURE', 'an undeclared field is never dropped');
  t.is(await verdict(t, wire.replace('{"name":', '{"iconUrl":"","name":')), 'ok', 'a declared string at "" means absent');
});

test('WIRE §3.4 (hostile): member names of Object.prototype and deep nesting give a code, never an exception', async (t) => {
  const card = publishedWithDefaults();
  const wire = await signed(card, card);
  for (const key of ['constructor', 'toString', 'valueOf', 'hasOwnProperty', '__proto__']) {
    t.is(await verdict(t, wire.replace('"id":"text.echo"', `"id":"text.echo","${key}":{"a":{}}`)), 'INVALID_SIGNATURE', key);
    t.is(await verdict(t, wire.replace('{"name":', `{"${key}":{"a":{}},"name":`)), 'INVALID_SIGNATURE', `${key} at the top`);
  }
  const deep = `${'['.repeat(3000)}${']'.repeat(3000)}`;
  t.is(await verdict(t, wire.replace('"version":"1.0.0"', `"version":"1.0.0","x":${deep}`)), 'CARD_TOO_LARGE');
});
