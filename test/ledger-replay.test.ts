// SPEC §11: a signed ledger request is taken once, on any replica. A hold's or settle's request nonce is
// claimed inside the op's own transaction (issue 19: one round trip less), or by the route when the op was
// refused before its transaction: either way a copy of the request is REPLAYED, never answered again.
// test/postgres/ledger-replay.test.ts runs these on PostgreSQL.
import test, { type ExecutionContext } from 'ava';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { HubClient } from '../src/hub-client/client.js';
import { createIdentity, loadIdentity, type Identity } from '../src/identity/store.js';
import { signAuthorization } from '../src/protocol/authorization.js';
import { signRequest } from '../src/protocol/hub-auth.js';
import { startTestHub } from './helpers/hub.js';
import { tempDir } from './helpers/tmp.js';

const nonce = () => randomBytes(16).toString('hex');

async function setup(t: ExecutionContext) {
  const root = await tempDir(t);
  const hub = await startTestHub({ dataDir: join(root, 'hub'), port: 0, registrationsPerMinute: 0 });
  t.teardown(() => hub.close());
  const ids: Identity[] = [];
  for (const name of ['payer', 'payee', 'other']) {
    const id = await createIdentity(join(root, name), Date.now());
    await new HubClient(hub.url, id).register(name, null);
    ids.push(id);
  }
  const [payer, payee, other] = ids as [Identity, Identity, Identity];
  await new HubClient(hub.url, await loadIdentity(join(root, 'hub'))).mint(payer.aid, '5', nonce());
  /** A base64 authorization of `amount` from payer to payee, and its nonce (the hold's id). */
  const authorize = (amount: string) => {
    const n = nonce();
    const bytes = signAuthorization(payer, {
      to: payee.aid,
      amount,
      asset: 'credit',
      network: `hub:${hub.aid}`,
      taskId: 'task-1',
      quoteId: 'quote-1',
      nonce: n,
      validBefore: Date.now() + 600_000,
    });
    return { authorization: Buffer.from(bytes).toString('base64'), hold: n };
  };
  return { hub, payer, payee, other, authorize };
}

/** One signed request, sent `copies` times at once: each copy's status and error code ('ok' when answered 200). */
async function sendCopies(url: string, who: Identity, path: string, body: unknown, copies: number): Promise<string[]> {
  const bytes = Buffer.from(JSON.stringify(body));
  const headers = { 'content-type': 'application/json', ...signRequest(who.signer, who.aid, 'POST', path, bytes, Date.now()) };
  return Promise.all(
    Array.from({ length: copies }, async () => {
      const r = await fetch(`${url}${path}`, { method: 'POST', headers, body: bytes });
      return r.status === 200 ? 'ok' : `${r.status} ${(await r.json()).error.code}`;
    }),
  );
}

const sorted = (xs: string[]) => [...xs].sort();

const once = (copies: number) => sorted(['ok', ...Array(copies - 1).fill('401 REPLAYED')]);

test('SPEC §11: one signed hold and one signed capture, each sent 8 times at once, are each taken once; the copies are REPLAYED', async (t) => {
  const { hub, payee, authorize } = await setup(t);
  const { authorization, hold } = authorize('2');
  const held = await sendCopies(hub.url, payee, '/ledger/hold', { authorization }, 8);
  t.deepEqual(sorted(held), once(8), held.join(', '));
  const settled = await sendCopies(hub.url, payee, '/ledger/settle', { hold, action: 'capture', nonce: nonce() }, 8);
  t.deepEqual(sorted(settled), once(8), settled.join(', '));
  t.deepEqual(await hub.ledger.totals(), { minted: 5n, balances: 5n, held: 0n }, 'held once, captured once');
});

test('SPEC §11: a refused ledger request sent again is REPLAYED, refused before its transaction or inside it', async (t) => {
  const { hub, payee, other, authorize } = await setup(t);
  const { authorization } = authorize('9');
  // Inside the transaction: the payer has 5 credits.
  t.deepEqual(await sendCopies(hub.url, payee, '/ledger/hold', { authorization }, 1), ['402 INSUFFICIENT_FUNDS']);
  // Before it: only the payee may ask for the hold; a hold id that is no nonce.
  t.deepEqual(await sendCopies(hub.url, other, '/ledger/hold', { authorization }, 1), ['403 NOT_PAYEE']);
  t.deepEqual(await sendCopies(hub.url, payee, '/ledger/settle', { hold: 'nope', action: 'capture', nonce: nonce() }, 1), [
    '400 BAD_REQUEST',
  ]);
  // The same signed requests again (and again at once): each was taken.
  for (const [who, path, body] of [
    [payee, '/ledger/hold', { authorization }],
    [other, '/ledger/hold', { authorization }],
  ] as const) {
    const bytes = Buffer.from(JSON.stringify(body));
    const headers = { 'content-type': 'application/json', ...signRequest(who.signer, who.aid, 'POST', path, bytes, Date.now()) };
    const send = async () => {
      const r = await fetch(`${hub.url}${path}`, { method: 'POST', headers, body: bytes });
      return `${r.status} ${(await r.json()).error.code}`;
    };
    const first = await send();
    t.not(first, '401 REPLAYED', path);
    t.deepEqual(await Promise.all([send(), send(), send()]), Array(3).fill('401 REPLAYED'), `${who.aid} ${first}`);
  }
  t.deepEqual(await hub.ledger.totals(), { minted: 5n, balances: 5n, held: 0n });
});
