// SPEC §11 (hub: cards verified on entry, authenticated writes with a clock window and no replay, KEL
// extensions only) and §6.4 (the reader catches a hub that tampers).
import test, { type ExecutionContext } from 'ava';
import { join } from 'node:path';
import { tempDir } from './helpers/tmp.js';
import { startTestHub } from './helpers/hub.js';
import { HubClient, HubRefusedError } from '../src/hub-client/client.js';
import { createIdentity, rotateIdentity, loadIdentity, type Identity } from '../src/identity/store.js';
import { signRequest } from '../src/protocol/hub-auth.js';
import { encodeKel } from '../src/identity/kel.js';
import { validateConfig } from '../src/config/load.js';
import { buildPublicCard } from '../src/card/build.js';
import { signCard } from '../src/protocol/card/jws.js';
import { Store } from '../store/db.js';
import { Reader } from '../src/reader/reader.js';
import { currentKeys, signKeySet } from '../src/relay/keyset.js';
import type { AgentRecord, HubStorage } from '../src/hub/storage/types.js';

async function setup(t: ExecutionContext) {
  const root = await tempDir(t);
  const hub = await startTestHub({ dataDir: join(root, 'hub'), port: 0 });
  t.teardown(() => hub.close());
  const { config } = validateConfig({
    hub: hub.url,
    inbound: { public_capabilities: [{ id: 'echo' }] },
    modules: { service: { capabilities: [{ id: 'echo', url: 'unix:///run/echo.sock' }] } },
  });
  const node = join(root, 'node');
  await createIdentity(node, Date.now());
  const cardFor = (id: Identity, seq: bigint, name = 'echoer') =>
    JSON.stringify(
      signCard(
        buildPublicCard(config!, { name }, id.aid, { seq, issuedAt: Date.now(), notBefore: Date.now() })!,
        id.signer,
        hub.url,
        id.aid,
        id.kel.ksn,
      ),
    );
  return { root, hub, node, cardFor, identity: await loadIdentity(node) };
}

const refusal = async (p: Promise<unknown>) => {
  try {
    await p;
  } catch (err) {
    if (err instanceof HubRefusedError) return err.code;
    throw err;
  }
  return 'accepted';
};

test('SPEC §11: register, re-register with a higher seq; lower or forked seqs are refused', async (t) => {
  const { hub, identity, cardFor } = await setup(t);
  const client = new HubClient(hub.url, identity);
  const second = cardFor(identity, 2n);
  await client.register('echoer', second);
  t.is(await client.card(identity.aid), second, 'the hub serves the card byte for byte as signed');
  t.is(await refusal(client.register('echoer', cardFor(identity, 1n))), 'SEQ_ROLLBACK');
  t.is(await refusal(client.register('echoer', cardFor(identity, 2n, 'other name'))), 'SEQ_FORK');
  t.is(await refusal(client.register('echoer', cardFor(identity, 3n))), 'accepted');
  await client.withdraw();
  t.is(await refusal(client.card(identity.aid)), 'NO_CARD');
  t.is(await refusal(client.register('echoer', cardFor(identity, 3n, 'again'))), 'SEQ_FORK', 'the high-water mark outlives a withdrawal');
});

test('SPEC §11: writes need the current key, a fresh time, and a nonce never seen', async (t) => {
  const { hub, identity, cardFor, root } = await setup(t);
  const body = Buffer.from(
    JSON.stringify({ kel: Buffer.from(encodeKel(identity.kel.events)).toString('base64'), name: 'x', card: cardFor(identity, 1n) }),
  );
  const post = (headers: object) =>
    fetch(`${hub.url}/agents`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const headers = signRequest(identity.signer, identity.aid, 'POST', '/agents', body, Date.now());
  t.is((await post(headers)).status, 200);
  const replay = await post(headers);
  t.is(replay.status, 401);
  t.is((await replay.json()).error.code, 'REPLAYED');
  const old = await post(signRequest(identity.signer, identity.aid, 'POST', '/agents', body, Date.now() - 121_000));
  t.is((await old.json()).error.code, 'CLOCK_SKEW');
  const other = await createIdentity(join(root, 'other'), 1);
  const forged = await post(signRequest(other.signer, identity.aid, 'POST', '/agents', body, Date.now()));
  t.is((await forged.json()).error.code, 'UNAUTHENTICATED');
  t.is((await post({})).status, 401);
});

test('SPEC §11: the KEL store accepts extensions only; a rotated node re-registers with its new key', async (t) => {
  const { hub, node, cardFor } = await setup(t);
  const before = await loadIdentity(node);
  await new HubClient(hub.url, before).register('n', cardFor(before, 1n));
  const after = await rotateIdentity(node, Date.now());
  // The old key can no longer write; the old (shorter) KEL is refused.
  t.is(await refusal(new HubClient(hub.url, before).register('n', null)), 'accepted', 'same KEL, still current for the hub');
  const client = new HubClient(hub.url, after);
  await client.register('n', cardFor(after, 2n));
  t.is(await refusal(new HubClient(hub.url, before).register('n', null)), 'KEL_ROLLBACK');
  t.is((await client.kel(after.aid)).length, encodeKel(after.kel.events).length);
  const jwks = await (await fetch(`${hub.url}/agents/${after.aid}/jwks.json`)).json();
  t.is(jwks.keys[0].kid, `did:anet:${after.aid}#1`);
  t.is(await refusal(client.register('n', cardFor(before, 3n))), 'KEY_NOT_CURRENT', 'a card signed before the rotation');
});

/** A hub that alters what it stores, behind every check (written straight to its storage). */
async function tamper(storage: HubStorage, aid: string, fn: (card: any) => void): Promise<void> {
  const rec = (await storage.agents.get(aid)) as AgentRecord;
  const card = JSON.parse(rec.card!);
  fn(card);
  await storage.agents.put({ ...rec, card: JSON.stringify(card) });
}

test('SPEC §6.4: a hub that alters a skill, a field or the seq is caught by the reader (key invalid)', async (t) => {
  const { hub, identity, cardFor, root } = await setup(t);
  const client = new HubClient(hub.url, identity);
  const store = await Store.open(join(root, 'reader'));
  t.teardown(() => store.close());
  const reader = new Reader(store, new HubClient(hub.url));
  const genuine = cardFor(identity, 5n);
  await client.register('echoer', genuine);
  t.like((await reader.find({}))[0], { key: 'confirmed', verified: true });
  for (const change of [
    (c: any) => (c.skills[0].description = 'forged'),
    (c: any) => (c.name = 'forged'),
    (c: any) => (c.capabilities.extensions[0].params.seq = '9'),
  ]) {
    await client.register('echoer', genuine);
    await tamper(hub.storage, identity.aid, change);
    t.like((await reader.find({}))[0], { key: 'invalid', verified: false, code: 'INVALID_SIGNATURE' });
  }
  // A hub serving an older, genuinely signed card is caught by the reader's own high-water mark.
  const rec = (await hub.storage.agents.get(identity.aid)) as AgentRecord;
  await hub.storage.agents.put({ ...rec, card: cardFor(identity, 4n) });
  t.like((await reader.find({}))[0], { key: 'invalid', code: 'SEQ_ROLLBACK' });
});

test('SPEC §6.4: after a rotation, a card signed with the old key is refused by the reader', async (t) => {
  const { hub, node, cardFor, root } = await setup(t);
  const before = await loadIdentity(node);
  await new HubClient(hub.url, before).register('n', cardFor(before, 1n));
  const store = await Store.open(join(root, 'reader'));
  t.teardown(() => store.close());
  const reader = new Reader(store, new HubClient(hub.url));
  t.like((await reader.find({}))[0], { key: 'confirmed' });
  const after = await rotateIdentity(node, Date.now());
  await new HubClient(hub.url, after).updateKel();
  t.like((await reader.find({}))[0], { key: 'invalid', code: 'KEY_NOT_CURRENT' });
  // A hub that then rolls the KEL back does not win: the reader keeps the longer KEL it has seen.
  const rec = (await hub.storage.agents.get(after.aid)) as AgentRecord;
  await hub.storage.agents.put({ ...rec, kel: encodeKel(before.kel.events) });
  t.like((await reader.find({}))[0], { code: 'KEY_NOT_CURRENT' });
});

test('SPEC §5.1: a node with nothing offered withdraws its card; seen and published cards go to the history store', async (t) => {
  const { hub, node, root } = await setup(t);
  const { Node } = await import('../src/node/node.js');
  const { cardHistory } = await import('../src/card/history.js');
  const { writeFile } = await import('node:fs/promises');
  const offering = {
    hub: hub.url,
    inbound: { public_capabilities: [{ id: 'echo' }] },
    modules: { service: { capabilities: [{ id: 'echo', url: 'unix:///run/echo.sock' }] } },
  };
  await writeFile(join(node, 'config.json'), JSON.stringify(offering));
  let n = await Node.open(node);
  t.is((await n.publish()).outcome, 'published');
  const aid = n.identity.aid;
  await n.close();

  const store = await Store.open(join(root, 'reader'));
  const reader = new Reader(store, new HubClient(hub.url));
  await reader.find({});
  const seen = await cardHistory(store, aid);
  t.is(seen.length, 1);
  t.like(seen[0], { aid, seq: '1', source: `hub ${hub.url}` });
  await store.close();

  await writeFile(join(node, 'config.json'), JSON.stringify({ hub: hub.url }));
  n = await Node.open(node);
  t.is((await n.publish()).outcome, 'withdrawn');
  t.deepEqual(
    (await cardHistory(n.store, aid)).map((c) => [c.seq, c.source]),
    [['1', 'self']],
  );
  await n.close();
  t.is(await refusal(new HubClient(hub.url).card(aid)), 'NO_CARD');
});

test('SPEC §5: every card the node emits passes the A2A v1.0 required-field check and verifies', async (t) => {
  const fc = (await import('fast-check')).default;
  const { verifyCard } = await import('../src/protocol/card/verify.js');
  const id = await loadIdentity((await setup(t)).node);
  fc.assert(
    fc.property(
      fc.uniqueArray(
        fc.stringMatching(/^[a-z][a-z0-9.]{0,10}$/).filter((s) => s !== 'chat'),
        { maxLength: 6 },
      ),
      fc.array(fc.nat(5), { minLength: 6, maxLength: 6 }),
      fc.boolean(),
      fc.boolean(),
      (ids, prices, open, allowOnlyFirst) => {
        const { config } = validateConfig({
          hub: 'http://127.0.0.1:1',
          inbound: {
            policy: open ? 'open' : 'closed',
            public_capabilities: ids.map((id, i) => ({ id, allow_only: allowOnlyFirst && i === 0 })),
          },
          modules: { service: { capabilities: ids.map((id, i) => ({ id, url: `unix:///run/${id}.sock`, price: prices[i] })) } },
        });
        const card = buildPublicCard(config!, {}, id.aid, { seq: 1n, issuedAt: 1, notBefore: 1 });
        const listed = ids.filter((_, i) => !(allowOnlyFirst && i === 0));
        if (card === null) return listed.length === 0 && !open;
        const wire = JSON.stringify(signCard(card, id.signer, 'http://127.0.0.1:1', id.aid, id.kel.ksn));
        return verifyCard(wire, { kel: id.kel, now: 2 }).ok && !/"price"|"amount"/.test(wire);
      },
    ),
    { numRuns: 150 },
  );
  t.pass();
});

test('WIRE §3.4: SEQ_ROLLBACK and SEQ_FORK high-water marks survive restarts of the hub and the reader', async (t) => {
  const root = await tempDir(t);
  const hubDir = join(root, 'hub');
  let hub = await startTestHub({ dataDir: hubDir, port: 0 });
  const node = join(root, 'node');
  const id = await createIdentity(node, Date.now());
  const { config } = validateConfig({
    hub: hub.url,
    inbound: { public_capabilities: [{ id: 'e' }] },
    modules: { service: { capabilities: [{ id: 'e', url: 'unix:///e.sock' }] } },
  });
  const cardFor = (seq: bigint, url: string) =>
    JSON.stringify(signCard(buildPublicCard(config!, {}, id.aid, { seq, issuedAt: 1, notBefore: 1 })!, id.signer, url, id.aid, 0));
  await new HubClient(hub.url, id).register('n', cardFor(3n, hub.url));
  let store = await Store.open(join(root, 'reader'));
  t.like((await new Reader(store, new HubClient(hub.url)).find({}))[0], { verified: true });
  await store.close();
  await hub.close();

  hub = await startTestHub({ dataDir: hubDir, port: 0 });
  t.teardown(() => hub.close());
  t.is(await refusal(new HubClient(hub.url, id).register('n', cardFor(2n, hub.url))), 'SEQ_ROLLBACK');
  // A hub that lost its memory (or lies) serves an older card: the restarted reader still refuses it.
  const rec = (await hub.storage.agents.get(id.aid)) as AgentRecord;
  await hub.storage.agents.put({ ...rec, card: cardFor(2n, hub.url) });
  store = await Store.open(join(root, 'reader'));
  t.teardown(() => store.close());
  t.like((await new Reader(store, new HubClient(hub.url)).find({}))[0], { verified: false, code: 'SEQ_ROLLBACK' });
});

test('SPEC §11: search pages with cursor and limit; SPEC §6.4: key is stale when the KEL held is older than 24 h', async (t) => {
  const root = await tempDir(t);
  const hub = await startTestHub({ dataDir: join(root, 'hub'), port: 0 });
  t.teardown(() => hub.close());
  const { config } = validateConfig({
    hub: hub.url,
    inbound: { public_capabilities: [{ id: 'e' }] },
    modules: { service: { capabilities: [{ id: 'e', url: 'unix:///e.sock' }] } },
  });
  const ids: Identity[] = [];
  for (let i = 0; i < 5; i++) {
    const id = await createIdentity(join(root, `n${i}`), Date.now());
    ids.push(id);
    const wire = JSON.stringify(
      signCard(
        buildPublicCard(config!, { name: `node ${i}` }, id.aid, { seq: 1n, issuedAt: 1, notBefore: 1 })!,
        id.signer,
        hub.url,
        id.aid,
        0,
      ),
    );
    await new HubClient(hub.url, id).register(`node ${i}`, wire);
  }
  const client = new HubClient(hub.url);
  const seen: string[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 5; page++) {
    const r = await client.search({ limit: 2, ...(cursor ? { cursor } : {}) });
    seen.push(...r.agents.map((a) => a.aid));
    if (!r.next) break;
    cursor = r.next;
  }
  t.deepEqual(seen, ids.map((i) => i.aid).sort(), 'every agent once, in AID order');
  t.deepEqual(
    (await client.search({ q: 'node 3' })).agents.map((a) => a.name),
    ['node 3'],
  );

  let now = Date.now();
  const store = await Store.open(join(root, 'reader'));
  t.teardown(() => store.close());
  const reader = new Reader(store, client, () => now);
  const target = ids[0]!;
  t.like(await reader.publicCard(target.aid), { key: 'confirmed', verified: true });
  // The hub no longer serves a usable KEL; the one held is 25 h old.
  const rec = (await hub.storage.agents.get(target.aid)) as AgentRecord;
  await hub.storage.agents.put({ ...rec, kel: new Uint8Array([0x80]) });
  now += 25 * 3_600_000;
  t.like(await reader.publicCard(target.aid), { key: 'stale', verified: true });
});

test("SPEC §11: a request body past the hub's limit is dropped unread; the hub keeps serving", async (t) => {
  const { hub } = await setup(t);
  const over = await fetch(`${hub.url}/agents`, { method: 'POST', body: Buffer.alloc(300 * 1024, 0x20) }).then(
    (r) => r.status,
    () => 'dropped',
  );
  t.true(over === 'dropped' || over === 413, `got ${over}`);
  const small = await fetch(`${hub.url}/agents`, { method: 'POST', body: '{' });
  t.is(small.status, 400, 'a small bad body is read whole and refused with its error');
  t.is((await small.json()).error.code, 'BAD_REQUEST');
  t.is((await fetch(`${hub.url}/health`)).status, 200);
});

test('SPEC §11: a card published and a key set put at the same moment both stay (each write is made from what is stored then)', async (t) => {
  const { hub, node, identity, cardFor } = await setup(t);
  const client = new HubClient(hub.url, identity);
  await client.register('echoer', cardFor(identity, 1n));
  const { keys } = await currentKeys(node, Date.now());
  const keySet = signKeySet(identity, keys);
  for (let seq = 2n; seq <= 11n; seq++) {
    await hub.storage.agents.update(identity.aid, (cur) => {
      const { keys: _, ...rest } = cur!;
      return rest;
    });
    // Each read-check-write is atomic against the other: a write made from a stale read would drop one.
    await Promise.all([client.register('echoer', cardFor(identity, seq)), client.putKeys(keySet)]);
    const rec = (await hub.storage.agents.get(identity.aid))!;
    t.is(rec.seq, seq.toString(), `seq ${seq}: the card stayed`);
    t.truthy(rec.keys, `seq ${seq}: the key set stayed`);
  }
});
