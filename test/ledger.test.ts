// SPEC §11 (the hub's ledger of credits: balances, holds, captures, releases, all idempotent; `anet hub
// mint`) and §10 (the provider holds the caller's signed authorization, then captures or releases it).
// Real hubs on loopback ports, real LevelDB in temp dirs, real identities and the real HubClient.
import test, { type ExecutionContext } from 'ava';
import fc from 'fast-check';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { unlink } from 'node:fs/promises';
import { tempDir } from './helpers/tmp.js';
import { OffsetClock } from './helpers/clock.js';
import { runBin, runCli } from './helpers/cli.js';
import { startBin } from './helpers/proc.js';
import { startNet } from './helpers/net.js';
import { filesContaining } from './helpers/files.js';
import { startTestHub, onLevelDb } from './helpers/hub.js';

/** Tests that read or alter the embedded LevelDB's own bytes, or write a stopped hub's LevelDB: the embedded run only. */
const levelDbTest = onLevelDb ? test : () => {};
import { HubClient, HubRefusedError } from '../src/hub-client/client.js';
import type { HoldAnswer, SettleAnswer } from '../src/protocol/hub-api.js';
import { HOLD_TTL_MS, LedgerDamagedError, checkLedger } from '../src/hub/ledger.js';
import type { HistoryEntry } from '../src/protocol/hub-api.js';
import { HubStore } from '../src/hub/store.js';
import { LevelLedger, LevelNonces } from '../src/hub/storage/level.js';
import { seqKey } from '../store/db.js';
import { pack, unpack } from '../store/codec.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { createIdentity, loadIdentity, type Identity } from '../src/identity/store.js';
import { signAuthorization, peekAuthorization, type Authorization } from '../src/protocol/authorization.js';

const nonce = () => randomBytes(16).toString('hex');

const refusal = async (p: Promise<unknown>) => {
  try {
    await p;
  } catch (err) {
    if (err instanceof HubRefusedError) return err.code;
    throw err;
  }
  return 'accepted';
};

interface Agent {
  id: Identity;
  aid: string;
  client: HubClient;
}

/** A hub on a port of its own with a movable clock, its operator's client, and registered agents on demand. */
async function setup(t: ExecutionContext) {
  const root = await tempDir(t);
  const clock = new OffsetClock();
  const now = () => clock.now();
  const hubDir = join(root, 'hub');
  const env = {
    root,
    clock,
    hubDir,
    // The invariant registers 75 AIDs from loopback: the hub's per-address registration limit is not what is tested here.
    hub: await startTestHub({ dataDir: hubDir, port: 0, now, registrationsPerMinute: 0 }),
    operator: undefined as unknown as HubClient,
    agents: new Map<string, Identity>(),
    async agent(name: string): Promise<Agent> {
      let id = env.agents.get(name);
      if (!id) {
        id = await createIdentity(join(root, name), now());
        env.agents.set(name, id);
        await new HubClient(env.hub.url, id, now).register(name, null);
      }
      return { id, aid: id.aid, client: new HubClient(env.hub.url, id, now) };
    },
    /** The payer's signed authorization for `payee`, valid 10 minutes, on this hub's network. */
    authorize(payer: Agent, payee: Agent, amount: string, over: Partial<Omit<Authorization, 'from'>> = {}): Uint8Array {
      return signAuthorization(payer.id, {
        to: payee.aid,
        amount,
        asset: 'credit',
        network: `hub:${env.hub.aid}`,
        taskId: 'task-7f3e',
        quoteId: 'quote-91ab',
        nonce: nonce(),
        validBefore: now() + 600_000,
        ...over,
      });
    },
    async restart(): Promise<void> {
      await env.hub.close();
      env.hub = await startTestHub({ dataDir: hubDir, port: 0, now, registrationsPerMinute: 0 });
      env.operator = new HubClient(env.hub.url, await loadIdentity(hubDir), now);
    },
    async mint(agent: Agent, amount: string) {
      return env.operator.mint(agent.aid, amount, nonce());
    },
    async balances(...agents: Agent[]): Promise<string[]> {
      return Promise.all(agents.map(async (a) => (await a.client.account(a.aid)).balance));
    },
  };
  env.operator = new HubClient(env.hub.url, await loadIdentity(hubDir), now);
  t.teardown(() => env.hub.close());
  return env;
}

/** The authorization's fields, read without its signature (its nonce is the hold's id). */
const fields = (bytes: Uint8Array) => (peekAuthorization(bytes) as { ok: true; auth: Authorization }).auth;

test('SPEC §11: the operator mints to a registered AID; anyone else, an unknown AID or a bad amount is refused', async (t) => {
  const env = await setup(t);
  const alice = await env.agent('alice');
  const n = nonce();
  const first = await env.operator.mint(alice.aid, '250', n);
  t.like(first, { aid: alice.aid, amount: '250', balance: '250' });
  t.regex(first.tx, /^tx_[0-9a-f]{32}$/);
  t.deepEqual(await env.operator.mint(alice.aid, '250', n), first, 'the same nonce and body answer the same, once');
  t.is(await refusal(env.operator.mint(alice.aid, '251', n)), 'NONCE_REUSED');
  t.is(await refusal(alice.client.mint(alice.aid, '1000', nonce())), 'NOT_HUB');
  const stranger = await createIdentity(join(env.root, 'stranger'), Date.now());
  t.is(await refusal(env.operator.mint(stranger.aid, '5', nonce())), 'UNKNOWN_AID');
  for (const bad of ['0', '-1', '1.5', '007', '9223372036854775808', '1e3'])
    t.is(await refusal(env.operator.mint(alice.aid, bad, nonce())), 'BAD_REQUEST', bad);
  t.is(await refusal(env.operator.mint(alice.aid, '1', 'not-a-nonce')), 'BAD_REQUEST');
  const account = await alice.client.account(alice.aid);
  t.like(account, { aid: alice.aid, balance: '250', held: '0' });
  t.deepEqual(
    account.history.map((e) => [e.seq, e.kind, e.amount, e.counterparty, e.hold, e.balance]),
    [[1, 'mint', '250', null, null, '250']],
  );
  t.deepEqual(await env.hub.ledger.totals(), { minted: 250n, balances: 250n, held: 0n });
});

test('SPEC §11: the total minted stays an amount (at most 2^63-1), so no balance can pass it', async (t) => {
  const env = await setup(t);
  const alice = await env.agent('alice');
  await env.mint(alice, '9223372036854775807');
  t.is(await refusal(env.mint(alice, '1')), 'SUPPLY_LIMIT');
  t.is((await alice.client.account(alice.aid)).balance, '9223372036854775807');
});

test('SPEC §10: hold then capture pays the payee; hold then release gives it back; history on both sides', async (t) => {
  const env = await setup(t);
  const [alice, bob] = [await env.agent('alice'), await env.agent('bob')];
  await env.mint(alice, '100');
  const auth = env.authorize(alice, bob, '30');
  const held = await bob.client.hold(auth);
  t.like(held, { from: alice.aid, to: bob.aid, amount: '30', state: 'held' });
  t.like(await alice.client.account(alice.aid), { balance: '70', held: '30' });
  const captured = await bob.client.settle(held.hold, 'capture', nonce());
  t.like(captured, { hold: held.hold, action: 'capture', amount: '30', state: 'captured' });
  t.deepEqual(await env.balances(alice, bob), ['70', '30']);

  const second = await bob.client.hold(env.authorize(alice, bob, '20'));
  t.like(await alice.client.account(alice.aid), { balance: '50', held: '20' });
  t.like(await bob.client.settle(second.hold, 'release', nonce()), { action: 'release', amount: '20', state: 'released' });
  const a = await alice.client.account(alice.aid);
  t.like(a, { balance: '70', held: '0' });
  t.deepEqual(
    a.history.map((e) => [e.kind, e.amount, e.counterparty, e.balance]),
    [
      ['mint', '100', null, '100'],
      ['hold', '30', bob.aid, '70'],
      ['capture', '30', bob.aid, '70'],
      ['hold', '20', bob.aid, '50'],
      ['release', '20', bob.aid, '70'],
    ],
  );
  t.deepEqual(
    (await bob.client.account(bob.aid)).history.map((e) => [e.kind, e.amount, e.counterparty, e.hold, e.balance]),
    [['credit', '30', alice.aid, held.hold, '30']],
  );
  t.deepEqual(await env.hub.ledger.totals(), { minted: 100n, balances: 100n, held: 0n });
  // The hub never learns what a payment bought: no task or quote id anywhere in its answers or on its disk.
  t.false(JSON.stringify([held, captured, a]).includes('task-7f3e'));
  await env.hub.close();
  t.deepEqual(await filesContaining(env.hubDir, 'task-7f3e'), []);
  t.deepEqual(await filesContaining(env.hubDir, 'quote-91ab'), []);
});

test('SPEC §10: each hold refusal has its code: payee, network, asset, expiry, funds, signature, shape, payer', async (t) => {
  const env = await setup(t);
  const [alice, bob, carol] = [await env.agent('alice'), await env.agent('bob'), await env.agent('carol')];
  await env.mint(alice, '50');
  t.is(await refusal(carol.client.hold(env.authorize(alice, bob, '10'))), 'NOT_PAYEE', 'only the payee named may hold');
  t.is(await refusal(bob.client.hold(env.authorize(alice, bob, '10', { network: 'hub:bafyreiother' }))), 'WRONG_NETWORK');
  t.is(await refusal(bob.client.hold(env.authorize(alice, bob, '10', { asset: 'usd' }))), 'WRONG_NETWORK');
  t.is(await refusal(bob.client.hold(env.authorize(alice, bob, '10', { validBefore: env.clock.now() - 1 }))), 'AUTHORIZATION_EXPIRED');
  t.is(await refusal(bob.client.hold(env.authorize(alice, bob, '51'))), 'INSUFFICIENT_FUNDS');
  // Signed by another key under alice's name.
  const forger = await createIdentity(join(env.root, 'forger'), Date.now());
  const forged = signAuthorization(
    { ...forger, aid: alice.aid, kel: alice.id.kel },
    {
      to: bob.aid,
      amount: '10',
      asset: 'credit',
      network: `hub:${env.hub.aid}`,
      taskId: 't',
      quoteId: 'q',
      nonce: nonce(),
      validBefore: env.clock.now() + 60_000,
    },
  );
  t.is(await refusal(bob.client.hold(forged)), 'BAD_AUTHORIZATION');
  const good = env.authorize(alice, bob, '10');
  const tampered = Uint8Array.from(good);
  tampered[tampered.length - 1]! ^= 1;
  t.is(await refusal(bob.client.hold(tampered)), 'BAD_AUTHORIZATION');
  t.is(await refusal(bob.client.hold(new Uint8Array([1, 2, 3]))), 'BAD_AUTHORIZATION');
  // A payer the hub does not know has no KEL to check its signature against (and no credits).
  const ghost = await createIdentity(join(env.root, 'ghost'), Date.now());
  t.is(await refusal(bob.client.hold(env.authorize({ id: ghost, aid: ghost.aid, client: bob.client }, bob, '1'))), 'UNKNOWN_AID');
  t.deepEqual(await env.balances(alice, bob), ['50', '0'], 'no refusal moved a credit');
  // A refusal is not recorded: the same authorization is decided again, and holds once there are funds.
  const big = env.authorize(alice, bob, '80');
  t.is(await refusal(bob.client.hold(big)), 'INSUFFICIENT_FUNDS');
  await env.mint(alice, '30');
  t.like(await bob.client.hold(big), { amount: '80', state: 'held' });
  t.like(await alice.client.account(alice.aid), { balance: '0', held: '80' });
});

test('SPEC §11: settle, accounts and unknown holds: NOT_PAYEE, UNKNOWN_HOLD, FORBIDDEN, HOLD_SETTLED', async (t) => {
  const env = await setup(t);
  const [alice, bob, carol] = [await env.agent('alice'), await env.agent('bob'), await env.agent('carol')];
  await env.mint(alice, '50');
  const held = await bob.client.hold(env.authorize(alice, bob, '10'));
  t.is(await refusal(carol.client.settle(held.hold, 'capture', nonce())), 'NOT_PAYEE');
  t.is(await refusal(alice.client.settle(held.hold, 'release', nonce())), 'NOT_PAYEE', 'not even the payer settles');
  t.is(await refusal(bob.client.settle(nonce(), 'capture', nonce())), 'UNKNOWN_HOLD');
  t.is(await refusal(bob.client.settle(held.hold, 'refund' as never, nonce())), 'BAD_REQUEST');
  t.is(await refusal(carol.client.account(alice.aid)), 'FORBIDDEN', 'an account is shown to its AID and the hub only');
  t.like(await env.operator.account(alice.aid), { balance: '40', held: '10' });
  await bob.client.settle(held.hold, 'capture', nonce());
  t.is(await refusal(bob.client.settle(held.hold, 'capture', nonce())), 'HOLD_SETTLED', 'a second capture under another nonce');
  t.is(await refusal(bob.client.settle(held.hold, 'release', nonce())), 'HOLD_SETTLED', 'a release after the capture');
  t.deepEqual(await env.balances(alice, bob), ['40', '10']);
});

test('SPEC §10, §11: idempotent by nonce: a retried hold or capture answers the same and never pays twice; another body is NONCE_REUSED', async (t) => {
  const env = await setup(t);
  const [alice, bob] = [await env.agent('alice'), await env.agent('bob')];
  await env.mint(alice, '100');
  const auth = env.authorize(alice, bob, '40');
  const held = await bob.client.hold(auth);
  t.deepEqual(await bob.client.hold(auth), held, 'the same authorization holds once');
  t.like(await alice.client.account(alice.aid), { balance: '60', held: '40' });
  // The same nonce in another authorization (another amount) is another body.
  const sameNonce = env.authorize(alice, bob, '41', { nonce: held.hold });
  t.is(await refusal(bob.client.hold(sameNonce)), 'NONCE_REUSED');

  const n = nonce();
  const captured = await bob.client.settle(held.hold, 'capture', n);
  for (let i = 0; i < 3; i++) t.deepEqual(await bob.client.settle(held.hold, 'capture', n), captured, 'a retried capture answers the same');
  t.deepEqual(await env.balances(alice, bob), ['60', '40'], 'and pays once');
  t.is(
    await refusal(bob.client.settle(held.hold, 'release', n)),
    'HOLD_SETTLED',
    'the settlement is kept per hold: its nonce with another action',
  );
  // Each kind of op has its own keys, and a settlement is keyed by its hold: a payer that spends the
  // provider's (predictable) settle nonce on a hold of its own cannot block the provider's capture.
  const carol = await env.agent('carol');
  const trap = await bob.client.hold(env.authorize(alice, bob, '1'));
  const victim = await carol.client.hold(env.authorize(alice, carol, '2'));
  const k0 = nonce();
  await bob.client.settle(trap.hold, 'release', k0);
  t.like(
    await carol.client.settle(victim.hold, 'capture', k0),
    { state: 'captured', amount: '2' },
    'the same nonce on another hold settles it',
  );
  t.like(await env.operator.mint(alice.aid, '1', held.hold), { amount: '1' }, 'a mint nonce is not a hold nonce');
  // A retry long after the authorization's validBefore still gets its answer: the record is the truth.
  env.clock.advance(3_600_000);
  t.deepEqual(await bob.client.hold(auth), held);
  // Concurrent retries of one capture: one op at a time, one payment.
  const again = await bob.client.hold(env.authorize(alice, bob, '5'));
  const k = nonce();
  const answers = await Promise.all(Array.from({ length: 8 }, () => bob.client.settle(again.hold, 'capture', k)));
  t.true(answers.every((a) => JSON.stringify(a) === JSON.stringify(answers[0])));
  t.deepEqual(await env.balances(alice, bob), ['54', '45'], 'alice: 100 - 40 - 2 (to carol) + 1 (minted) - 5');
  t.deepEqual(await env.hub.ledger.totals(), { minted: 101n, balances: 101n, held: 0n });
});

test('SPEC §10: a release before its hold leaves a void tombstone; the late hold is then HOLD_CLOSED', async (t) => {
  const env = await setup(t);
  const [alice, bob] = [await env.agent('alice'), await env.agent('bob')];
  await env.mint(alice, '20');
  const auth = env.authorize(alice, bob, '15');
  const id = fields(auth).nonce;
  const n = nonce();
  const voided = await bob.client.settle(id, 'release', n);
  t.like(voided, { hold: id, action: 'release', amount: '0', state: 'void' });
  t.deepEqual(await bob.client.settle(id, 'release', n), voided, 'idempotent like any op');
  t.is(await refusal(bob.client.hold(auth)), 'HOLD_CLOSED', 'the hold in flight arrives too late');
  t.is(await refusal(bob.client.settle(id, 'capture', nonce())), 'HOLD_SETTLED');
  t.deepEqual(await env.balances(alice, bob), ['20', '0'], 'the payer was never charged');
  t.deepEqual(await env.hub.ledger.totals(), { minted: 20n, balances: 20n, held: 0n });
});

test('SPEC §11: a hold not settled within 24 h goes back to the payer (sweep, and at start); a capture then is HOLD_EXPIRED', async (t) => {
  const env = await setup(t);
  const [alice, bob] = [await env.agent('alice'), await env.agent('bob')];
  await env.mint(alice, '100');
  const first: HoldAnswer = await bob.client.hold(env.authorize(alice, bob, '10'));
  env.clock.advance(HOLD_TTL_MS - 1000);
  t.is(await env.hub.ledger.sweep(), 0, 'not yet');
  env.clock.advance(1000);
  t.is(await env.hub.ledger.sweep(), 1);
  const a = await alice.client.account(alice.aid);
  t.like(a, { balance: '100', held: '0' });
  t.like(a.history.at(-1), { kind: 'expire', amount: '10', counterparty: bob.aid, hold: first.hold, balance: '100' });
  t.is(await refusal(bob.client.settle(first.hold, 'capture', nonce())), 'HOLD_EXPIRED');
  t.is(await refusal(bob.client.settle(first.hold, 'release', nonce())), 'HOLD_EXPIRED');

  // A hub that was down when a hold expired releases it as it starts.
  const second = await bob.client.hold(env.authorize(alice, bob, '25'));
  await env.hub.close();
  env.clock.advance(HOLD_TTL_MS + 60_000);
  await env.restart();
  t.like(await env.operator.account(alice.aid), { balance: '100', held: '0' });
  t.is(await refusal(new HubClient(env.hub.url, bob.id, () => env.clock.now()).settle(second.hold, 'capture', nonce())), 'HOLD_EXPIRED');
  t.deepEqual(await env.hub.ledger.totals(), { minted: 100n, balances: 100n, held: 0n });
});

test('SPEC §11: balances, holds and nonce records survive a hub restart', async (t) => {
  const env = await setup(t);
  const [alice, bob] = [await env.agent('alice'), await env.agent('bob')];
  await env.mint(alice, '90');
  const auth = env.authorize(alice, bob, '35');
  const held = await bob.client.hold(auth);
  const n = nonce();
  const settle = (c: HubClient) => c.settle(held.hold, 'capture', n);
  await env.restart();
  const [a2, b2] = [await env.agent('alice'), await env.agent('bob')];
  t.like(await a2.client.account(alice.aid), { balance: '55', held: '35' });
  t.deepEqual(await b2.client.hold(auth), held, 'the hold answer was kept');
  const captured: SettleAnswer = await settle(b2.client);
  await env.restart();
  const b3 = await env.agent('bob');
  t.deepEqual(await settle(b3.client), captured, 'a capture retried across a restart pays once');
  t.deepEqual(await env.balances(await env.agent('alice'), b3), ['55', '35']);
  t.is((await b3.client.account(bob.aid)).history.length, 1);
});

type Op =
  | { k: 'mint'; who: number; amount: number }
  | { k: 'hold'; from: number; to: number; amount: number }
  | { k: 'rehold'; i: number }
  | { k: 'settle'; i: number; action: 'capture' | 'release' }
  | { k: 'resettle'; i: number }
  | { k: 'age' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ k: fc.constant('mint' as const), who: fc.nat(2), amount: fc.integer({ min: 1, max: 400 }) }),
  fc.record({ k: fc.constant('hold' as const), from: fc.nat(2), to: fc.nat(2), amount: fc.integer({ min: 1, max: 300 }) }),
  fc.record({ k: fc.constant('rehold' as const), i: fc.nat() }),
  fc.record({ k: fc.constant('settle' as const), i: fc.nat(), action: fc.constantFrom('capture' as const, 'release' as const) }),
  fc.record({ k: fc.constant('resettle' as const), i: fc.nat() }),
  fc.record({ k: fc.constant('age' as const) }),
);

test('SPEC §11 invariant: over random ops and retries, balances + held always equal minted and no balance is negative', async (t) => {
  const env = await setup(t);
  let run = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 24 }), async (ops) => {
      run += 1;
      const agents = [await env.agent(`a${run}`), await env.agent(`b${run}`), await env.agent(`c${run}`)];
      // A model of the ledger: what each op must answer, and each balance after it.
      const balance = new Map(agents.map((a) => [a.aid, 0n]));
      const holds = new Map<string, { from: string; to: string; amount: bigint; state: string }>();
      const auths: { bytes: Uint8Array; from: string; to: Agent; amount: bigint; nonce: string; validBefore: number; answer?: unknown }[] =
        [];
      const settles: { hold: string; action: 'capture' | 'release'; nonce: string; by: Agent; answer?: unknown }[] = [];
      const attempt = async (p: Promise<unknown>) => {
        try {
          return { code: 'ok', answer: await p };
        } catch (err) {
          if (err instanceof HubRefusedError) return { code: err.code, answer: undefined };
          throw err;
        }
      };
      const hold = async (a: (typeof auths)[number]) => {
        const got = await attempt(a.to.client.hold(a.bytes));
        if (a.answer) return got.code === 'ok' && JSON.stringify(got.answer) === JSON.stringify(a.answer);
        const want =
          holds.get(a.nonce)?.state === 'void'
            ? 'HOLD_CLOSED'
            : a.validBefore <= env.clock.now()
              ? 'AUTHORIZATION_EXPIRED'
              : balance.get(a.from)! < a.amount
                ? 'INSUFFICIENT_FUNDS'
                : 'ok';
        if (got.code !== want) return false;
        if (want === 'ok') {
          a.answer = got.answer;
          balance.set(a.from, balance.get(a.from)! - a.amount);
          holds.set(a.nonce, { from: a.from, to: a.to.aid, amount: a.amount, state: 'held' });
        }
        return true;
      };
      const settle = async (s: (typeof settles)[number]) => {
        const got = await attempt(s.by.client.settle(s.hold, s.action, s.nonce));
        if (s.answer) return got.code === 'ok' && JSON.stringify(got.answer) === JSON.stringify(s.answer);
        const h = holds.get(s.hold);
        const want = !h
          ? s.action === 'capture'
            ? 'UNKNOWN_HOLD'
            : 'ok'
          : h.state === 'expired'
            ? 'HOLD_EXPIRED'
            : h.state !== 'held'
              ? 'HOLD_SETTLED'
              : 'ok';
        if (got.code !== want) return false;
        if (want === 'ok') {
          s.answer = got.answer;
          if (!h) holds.set(s.hold, { from: '', to: s.by.aid, amount: 0n, state: 'void' });
          else {
            h.state = s.action === 'capture' ? 'captured' : 'released';
            const to = s.action === 'capture' ? h.to : h.from;
            balance.set(to, balance.get(to)! + h.amount);
          }
        }
        return true;
      };
      for (const op of ops) {
        let ok = true;
        if (op.k === 'mint') {
          await env.mint(agents[op.who]!, String(op.amount));
          balance.set(agents[op.who]!.aid, balance.get(agents[op.who]!.aid)! + BigInt(op.amount));
        } else if (op.k === 'hold') {
          const [from, to] = [agents[op.from]!, agents[op.to]!];
          const bytes = env.authorize(from, to, String(op.amount));
          const auth = fields(bytes);
          auths.push({ bytes, from: from.aid, to, amount: BigInt(op.amount), nonce: auth.nonce, validBefore: auth.validBefore });
          ok = await hold(auths.at(-1)!);
        } else if (op.k === 'rehold' && auths.length) {
          ok = await hold(auths[op.i % auths.length]!);
        } else if (op.k === 'settle' && auths.length) {
          const a = auths[op.i % auths.length]!;
          settles.push({ hold: a.nonce, action: op.action, nonce: nonce(), by: a.to });
          ok = await settle(settles.at(-1)!);
        } else if (op.k === 'resettle' && settles.length) {
          ok = await settle(settles[op.i % settles.length]!);
        } else if (op.k === 'age') {
          env.clock.advance(HOLD_TTL_MS + 1);
          await env.hub.ledger.sweep();
          for (const h of holds.values())
            if (h.state === 'held') {
              h.state = 'expired';
              balance.set(h.from, balance.get(h.from)! + h.amount);
            }
        }
        if (!ok) return false;
        const totals = await env.hub.ledger.totals();
        if (totals.minted !== totals.balances + totals.held) return false;
        for (const a of agents) {
          const account = await env.hub.ledger.account(a.aid);
          let held = 0n;
          for (const h of holds.values()) if (h.state === 'held' && h.from === a.aid) held += h.amount;
          if (BigInt(account.balance) < 0n || BigInt(account.balance) !== balance.get(a.aid) || BigInt(account.held) !== held) return false;
        }
      }
      return true;
    }),
    { numRuns: 25 },
  );
  t.pass();
});

levelDbTest("SPEC §11: `anet hub mint` goes through the running hub (hub.json), else writes the stopped hub's store", async (t) => {
  const root = await tempDir(t);
  const hubDir = join(root, 'hub');
  const proc = startBin(t, ['hub', 'start', '--port', '0', '--data', hubDir]);
  const url = (await proc.waitFor(/ready on (http\S+);/)).match(/ready on (http\S+);/)![1]!;
  t.true(existsSync(join(hubDir, 'hub.json')));
  const alice = await createIdentity(join(root, 'alice'), Date.now());
  await new HubClient(url, alice).register('alice', null);

  let r = await runCli(['hub', 'mint', alice.aid, '40', '--data', hubDir]);
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout.split('\n')[0], `minted 40 credits to ${alice.aid}; balance 40`);
  t.regex(r.stdout, /through the running hub at http/);
  const stranger = await createIdentity(join(root, 'stranger'), Date.now());
  r = await runCli(['hub', 'mint', stranger.aid, '1', '--data', hubDir]);
  t.is(r.code, 1);
  t.regex(r.stderr, /UNKNOWN_AID.*register/);

  await proc.stop();
  t.false(existsSync(join(hubDir, 'hub.json')), 'a stopped hub removes hub.json');
  r = await runCli(['hub', 'mint', alice.aid, '2', '--data', hubDir, '--json']);
  t.is(r.code, 0, r.stderr);
  t.like(JSON.parse(r.stdout), { aid: alice.aid, amount: '2', balance: '42', via: 'store' });
  r = await runCli(['hub', 'mint', alice.aid, '3', '--data', hubDir]);
  t.regex(r.stdout, /no hub is running on .*: written to its store directly/);

  // Any running hub writes hub.json, an in-process one too (the demo's); one that lost it is named, not waited on.
  const hub = await startTestHub({ dataDir: hubDir, port: 0 });
  t.teardown(() => hub.close());
  r = await runCli(['hub', 'mint', alice.aid, '1', '--data', hubDir]);
  t.is(r.code, 0, r.stderr);
  t.regex(r.stdout, /through the running hub at http/);
  await unlink(join(hubDir, 'hub.json'));
  r = await runCli(['hub', 'mint', alice.aid, '1', '--data', hubDir]);
  t.is(r.code, 1);
  t.regex(r.stderr, /a hub holds the store .* but left no .*hub\.json/);
  t.like(await new HubClient(hub.url, alice).account(alice.aid), { balance: '46' });
  t.deepEqual(await hub.ledger.totals(), { minted: 46n, balances: 46n, held: 0n });

  for (const args of [
    ['hub', 'mint'],
    ['hub', 'mint', alice.aid],
    ['hub', 'mint', alice.aid, '1.5'],
    ['hub', 'mint', alice.aid, '0'],
    ['hub', 'mint', 'bob', '5'],
  ]) {
    t.is((await runCli([...args, '--data', hubDir])).code, 2, args.join(' '));
  }
  t.is((await runCli(['hub', 'mint', alice.aid, '5', '--data', join(root, 'nohub')])).code, 1);
});

test('SPEC §11, §12: `anet balance` through the daemon and in-process: balance, held, the last 10 entries', async (t) => {
  const net = await startNet(t);
  const { dir, aid } = await net.node('alice');
  const bobNode = await net.node('bob');
  const daemon = await net.start(dir);
  const operator = new HubClient(net.hub.url, await loadIdentity(join(net.root, 'hub')), () => net.clock.now());
  for (let i = 1; i <= 12; i++) await operator.mint(aid, String(i), nonce());
  const alice = await loadIdentity(dir);
  const bob = await loadIdentity(bobNode.dir);
  await new HubClient(net.hub.url, bob).register('bob', null);
  const auth = signAuthorization(alice, {
    to: bob.aid,
    amount: '8',
    asset: 'credit',
    network: `hub:${net.hub.aid}`,
    taskId: 't',
    quoteId: 'q',
    nonce: nonce(),
    validBefore: Date.now() + 60_000,
  });
  await new HubClient(net.hub.url, bob).hold(auth);

  let r = await runCli(['balance', '--data', dir]);
  t.is(r.code, 0, r.stderr);
  const lines = r.stdout.split('\n');
  t.is(lines[0], 'balance 70 credits (8 held)');
  t.is(lines.length, 11, 'the last 10 entries');
  t.regex(lines.at(-1)!, new RegExp(`hold +8 to ${bob.aid}; balance 70$`));
  t.regex(lines[1]!, /mint +4; balance 10$/);

  await daemon.close();
  r = await runCli(['balance', '--data', dir, '--json']);
  t.is(r.code, 0, r.stderr);
  const account = JSON.parse(r.stdout);
  t.like(account, { aid, balance: '70', held: '8' });
  t.is(account.history.length, 13);

  r = await runCli(['balance', '--data', bobNode.dir]);
  t.is(r.code, 0, r.stderr);
  t.is(r.stdout, 'balance 0 credits (0 held)');
});

const historyKey = (aid: string, seq: number) => `${aid}!${seqKey(seq)}`;

levelDbTest(
  "SPEC §11: each account's history is a hash chain: the hub refuses to start on a lost or altered newest entry, and replay --verify on its data dir names any damaged one",
  async (t) => {
    const env = await setup(t);
    const [alice, bob] = [await env.agent('alice'), await env.agent('bob')];
    for (const amount of ['10', '20', '30']) await env.mint(alice, amount);
    const held = await bob.client.hold(env.authorize(alice, bob, '15'));
    await bob.client.settle(held.hold, 'capture', nonce());
    const history = (await alice.client.account(alice.aid)).history;
    t.deepEqual(
      history.map((e) => e.kind),
      ['mint', 'mint', 'mint', 'hold', 'capture'],
    );
    t.false(
      history.some((e) => 'prev' in e),
      'the chain stays inside the hub: answers are as before',
    );
    await env.hub.close();
    const ok = await runCli(['replay', '--verify', '--data', env.hubDir]);
    t.is(ok.code, 0, ok.stdout);
    t.is(ok.stdout, "ok: the ledger's history, 6 entries of 2 accounts, each in order and matching its hash chain");

    /** Changes the stored history, runs `check`, then puts the original back. */
    const damaged = async (change: (store: HubStore) => Promise<void>, check: () => Promise<void>) => {
      let store = await HubStore.open(env.hubDir);
      const saved = await store.history.iterator({ valueEncoding: 'buffer' }).all();
      await change(store);
      await store.close();
      await check();
      store = await HubStore.open(env.hubDir);
      await store.history.clear();
      await store.history.batch(saved.map(([key, value]) => ({ type: 'put' as const, key, value, valueEncoding: 'buffer' })));
      await store.close();
    };
    const alter = (aid: string, seq: number) => async (store: HubStore) => {
      const e = (await store.history.get(historyKey(aid, seq))) as HistoryEntry;
      await store.history.put(historyKey(aid, seq), { ...e, amount: `${e.amount}1` });
    };
    const start = () => startTestHub({ dataDir: env.hubDir, port: 0, now: () => env.clock.now() });
    const verifyFails = async (seq: number, problem: RegExp) => {
      const r = await runCli(['replay', '--verify', '--data', env.hubDir]);
      t.is(r.code, 1);
      t.regex(
        r.stdout,
        new RegExp(`^damaged: the history of ${alice.aid} from seq ${seq}: (?:${problem.source}); restore ${env.hubDir} from a backup`),
      );
      t.regex(r.stdout, /\nFAILED: the ledger's history is damaged$/);
    };

    // The newest entry altered: the start refuses (one line: data dir, account, seq, what to do).
    await damaged(alter(alice.aid, 5), async () => {
      const err = await t.throwsAsync(start(), { instanceOf: LedgerDamagedError });
      t.is(
        err!.message,
        `the ledger in ${env.hubDir} is damaged: the history of ${alice.aid} from seq 5 (entry 5 does not match its hash); acknowledged ledger entries are lost or altered, so the hub will not run on it: restore ${env.hubDir} from a backup made before the damage (\`anet replay --verify --data ${env.hubDir}\` checks every entry)`,
      );
      const bin = await runBin(['hub', 'start', '--port', '0', '--data', env.hubDir]);
      t.is(bin.code, 1);
      t.is(bin.stderr.trim(), `anet: ${err!.message}`);
      await verifyFails(5, /entry 5 does not match the account's hash/);
    });
    // The newest entry lost.
    await damaged(
      (store) => store.history.del(historyKey(alice.aid, 5)),
      async () => {
        const err = await t.throwsAsync(start(), { instanceOf: LedgerDamagedError });
        t.regex(err!.message, new RegExp(`the history of ${alice.aid} from seq 5 \\(its newest entry, 5, is missing\\)`));
      },
    );
    // An older entry altered or lost: the start (which reads each account's newest) runs; verify names it.
    await damaged(alter(alice.aid, 2), async () => {
      const hub = await start();
      await hub.close();
      await verifyFails(2, /entry 2 does not match the hash entry 3 holds/);
    });
    await damaged(
      (store) => store.history.del(historyKey(alice.aid, 3)),
      () => verifyFails(3, /entry 3 is missing/),
    );

    env.hub = await start();
    t.is((await env.balances(await env.agent('alice'), await env.agent('bob'))).join(), '45,15', 'restored, the hub runs on');
  },
);

levelDbTest(
  "SPEC §11: a ledger written before the hash chain (no prev, no head) starts and verifies; an account's chain starts at its first new entry, linked to its old newest one",
  async (t) => {
    const env = await setup(t);
    const alice = await env.agent('alice');
    await env.hub.close();
    // The records as earlier versions wrote them: an account {balance, held, seq}, entries without prev.
    let store = await HubStore.open(env.hubDir);
    const old = (seq: number, balance: string): HistoryEntry => ({
      seq,
      tx: `tx_${seq}`,
      at: 1_700_000_000_000 + seq,
      kind: 'mint',
      amount: '10',
      counterparty: null,
      hold: null,
      balance,
    });
    await store.history.put(historyKey(alice.aid, 1), old(1, '10'));
    await store.history.put(historyKey(alice.aid, 2), old(2, '20'));
    await store.accounts.put(alice.aid, { balance: '20', held: '0', seq: 2 });
    await store.meta.put('ledger-minted', '20');
    t.deepEqual(await checkLedger(new LevelLedger(store, new LevelNonces(store.nonces)), env.hubDir, 'full'), { accounts: 1, entries: 2 });
    const oldBytes = (await store.history.get(historyKey(alice.aid, 2), { valueEncoding: 'buffer' })) as Buffer;
    await store.close();

    await env.restart();
    await env.mint(await env.agent('alice'), '5');
    t.like(await (await env.agent('alice')).client.account(alice.aid), { balance: '25' });
    await env.hub.close();
    store = await HubStore.open(env.hubDir);
    const third = unpack((await store.history.get(historyKey(alice.aid, 3), { valueEncoding: 'buffer' })) as Buffer) as HistoryEntry & {
      prev: string;
    };
    t.is(third.prev, Buffer.from(sha256(oldBytes)).toString('hex'), 'linked to the old newest entry');
    t.deepEqual(await checkLedger(new LevelLedger(store, new LevelNonces(store.nonces)), env.hubDir, 'full'), { accounts: 1, entries: 3 });
    // An old entry changed after the upgrade is caught through that link.
    await store.history.put(historyKey(alice.aid, 2), pack({ ...old(2, '20'), amount: '11' }), { valueEncoding: 'buffer' });
    const err = await t.throwsAsync(checkLedger(new LevelLedger(store, new LevelNonces(store.nonces)), env.hubDir, 'full'), {
      instanceOf: LedgerDamagedError,
    });
    t.is(err!.seq, 2);
    await store.history.put(historyKey(alice.aid, 2), oldBytes, { valueEncoding: 'buffer' });
    await store.close();
    env.hub = await startTestHub({ dataDir: env.hubDir, port: 0, now: () => env.clock.now() });
  },
);
