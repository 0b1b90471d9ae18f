// The ledger's prefetch (SPEC §11, issue 19): a transaction may declare what it will read (LedgerPlan) so
// PostgreSQL reads it in one round trip. Declared or not, every read must answer the same, and the
// insert rule must still catch a racer that made a row the prefetch found absent. Run on both backends
// (LevelDB ignores plans) and, for the race, on two PostgreSQL storages of one database, as two replicas.
import test, { type ExecutionContext } from 'ava';
import { openLevelStorage } from '../src/hub/storage/level.js';
import { openPostgresStorage } from '../src/hub/storage/postgres.js';
import type { HoldRecord, HubStorage, LedgerPlan, LedgerReads, LedgerWrites } from '../src/hub/storage/types.js';
import { postgresUrl, usePostgres } from './helpers/postgres.js';
import { tempDir } from './helpers/tmp.js';

usePostgres(test);

const noWrites = (): LedgerWrites => ({ accounts: new Map(), entries: [], holds: new Map(), op: null, minted: null });

const hold = (from: string | null, to: string, expires: number | null, state: HoldRecord['state'] = 'held'): HoldRecord => ({
  from,
  to,
  amount: '2',
  state,
  at: 1,
  expires,
  tx: `tx-${from}-${to}-${expires}`,
});

async function open(t: ExecutionContext, backend: string): Promise<HubStorage> {
  const s =
    backend === 'postgres' ? await openPostgresStorage(await postgresUrl(t)) : await openLevelStorage(await tempDir(t, 'anet-prefetch-'));
  t.teardown(() => s.close().catch(() => {}));
  return s;
}

/** Accounts alice, bob, carol; holds of alice to bob (one due at 250, one not), a tombstone; one op record. */
async function fixture(s: HubStorage): Promise<void> {
  await s.ledger.transact(async () => {
    const w = noWrites();
    for (const aid of ['alice', 'bob', 'carol']) w.accounts.set(aid, { balance: '10', held: '4', seq: 0 });
    w.holds.set('h-due', hold('alice', 'bob', 200));
    w.holds.set('h-open', hold('alice', 'bob', 900));
    w.holds.set('h-bob', hold('bob', 'carol', 100));
    w.holds.set('h-void', hold(null, 'bob', null, 'void'));
    w.op = { key: 'settle:h-x', digest: 'd', answer: { state: 'captured' } };
    return { answer: null, writes: w };
  });
}

/** Everything a test transaction reads, declared or not: the answers must not depend on the plan. */
async function readAll(r: LedgerReads) {
  return {
    alice: await r.account('alice'),
    bob: await r.account('bob'),
    carol: await r.account('carol'),
    nobody: await r.account('nobody'),
    hDue: await r.hold('h-due'),
    hOpen: await r.hold('h-open'),
    hVoid: await r.hold('h-void'),
    hNone: await r.hold('h-none'),
    op: await r.op('settle:h-x'),
    opNone: await r.op('hold:none'),
    aliceDue: await r.dueOf('alice', 250),
    aliceLater: await r.dueOf('alice', 1000),
    bobDue: await r.dueOf('bob', 250),
    again: [await r.account('alice'), await r.hold('h-due'), await r.dueOf('alice', 250)],
  };
}

const plans: [string, LedgerPlan | null][] = [
  ['no plan', null],
  ['a settle capture', { at: 250, op: 'settle:h-x', holds: ['h-due'], parties: 'both' }],
  ['a release of two holds and a tombstone', { at: 250, holds: ['h-void', 'h-open', 'h-none'], parties: 'payer' }],
  ['accounts only, one absent', { at: 250, accounts: ['carol', 'nobody', 'alice'] }],
  ['another time than the reads', { at: 100, op: 'hold:none', holds: ['h-bob'], accounts: ['alice'], parties: 'both' }],
];

for (const backend of ['postgres', 'leveldb'])
  test(`[${backend}] SPEC §11 ledger prefetch: reads answer the same whatever the plan declared, and what it missed is read`, async (t) => {
    const s = await open(t, backend);
    await fixture(s);
    const answers = [];
    for (const [, plan] of plans)
      answers.push(
        await s.ledger.transact(async (r) => {
          if (plan) await r.prefetch(plan);
          return { answer: await readAll(r), writes: null };
        }),
      );
    for (const [i, [what]] of plans.entries()) t.deepEqual(answers[i], answers[0], what);
    t.deepEqual(answers[0]!.aliceDue, ['h-due']);
    t.deepEqual(answers[0]!.aliceLater, ['h-due', 'h-open']);
    t.deepEqual(answers[0]!.bobDue, ['h-bob']);
    t.is(answers[0]!.nobody, undefined);
    t.is(answers[0]!.hNone, undefined);
  });

/** Adds 1 to `aid`'s balance (creating the account), after `pause` once the prefetch has read it. */
function credit(aid: string, pause: () => Promise<void>, runs: { n: number }) {
  return async (r: LedgerReads) => {
    runs.n++;
    await r.prefetch({ at: 0, accounts: [aid] });
    const a = await r.account(aid);
    await pause();
    const w = noWrites();
    w.accounts.set(aid, { balance: String(Number(a?.balance ?? '0') + 1), held: '0', seq: 0 });
    return { answer: a === undefined, writes: w };
  };
}

test('[postgres] SPEC §11 ledger prefetch: an account a replica made after the prefetch found it absent makes the transaction run again', async (t) => {
  const url = await postgresUrl(t);
  const [a, b] = [await openPostgresStorage(url), await openPostgresStorage(url)];
  t.teardown(() => Promise.all([a.close(), b.close()]));
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  let first = true;
  const runs = { n: 0 };
  // The first run waits, having read `new` as absent, until the other replica has created it.
  const pause = () => {
    if (!first) return Promise.resolve();
    first = false;
    return held;
  };
  const slow = a.ledger.transact(credit('new', pause, runs));
  while (runs.n === 0 || first) await new Promise((r) => setTimeout(r, 5));
  t.true(await b.ledger.transact(credit('new', async () => {}, { n: 0 })), 'the other replica creates it');
  release();
  t.false(await slow, 'run again, it reads the account the other replica made');
  t.is(runs.n, 2);
  const accounts = new Map<string, { balance: string }>();
  for await (const [aid, rec] of a.ledger.accounts()) accounts.set(aid, rec);
  t.is(accounts.get('new')?.balance, '2', 'both credits kept');
});

test('[postgres] SPEC §11 ledger prefetch: the op record written by the transaction whose lock this one waited for is seen', async (t) => {
  const url = await postgresUrl(t);
  const [a, b] = [await openPostgresStorage(url), await openPostgresStorage(url)];
  t.teardown(() => Promise.all([a.close(), b.close()]));
  await fixture(a);
  const plan: LedgerPlan = { at: 250, op: 'settle:h-open', holds: ['h-open'], parties: 'both' };
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  let locked!: () => void;
  const hasLock = new Promise<void>((r) => (locked = r));
  // A capture on one replica holds the hold's lock until told to commit its record.
  const first = a.ledger.transact(async (r) => {
    await r.prefetch(plan);
    locked();
    await held;
    const w = noWrites();
    w.holds.set('h-open', { ...hold('alice', 'bob', 900), state: 'captured' });
    w.op = { key: 'settle:h-open', digest: 'd-capture', answer: { state: 'captured' } };
    return { answer: null, writes: w };
  });
  await hasLock;
  // The same settlement on the other replica waits for that lock, then must answer from the record.
  const second = b.ledger.transact(async (r) => {
    await r.prefetch(plan);
    return { answer: { op: await r.op('settle:h-open'), state: (await r.hold('h-open'))?.state }, writes: null };
  });
  await new Promise((r) => setTimeout(r, 300));
  release();
  await first;
  t.deepEqual(await second, { op: { digest: 'd-capture', answer: { state: 'captured' } }, state: 'captured' });
});
