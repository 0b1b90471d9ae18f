// Review of the PostgreSQL ledger batches (SPEC §11, issue 19; src/hub/storage/ledger-batch.ts): ops that
// wait while a replica's transactions are under way run one after another in ONE transaction, each reading
// through an overlay of the earlier ops' writes. LedgerStore.transact promises each of them what a
// transaction of its own would give: the same reads, and all of its writes or none. These tests put a few
// store-level transactions (LedgerReads/LedgerWrites, as test/hub-storage.test.ts does) in one batch for
// certain: 4 blockers take the replica's 4 in-flight slots, the ops queue behind them, and the first blocker
// to end starts them together.
import test, { type ExecutionContext } from 'ava';
import { openPostgresStorage } from '../../src/hub/storage/postgres.js';
import type { HoldRecord, HubStorage, LedgerReads, LedgerWrites } from '../../src/hub/storage/types.js';
import { postgresUrl, usePostgres } from '../helpers/postgres.js';

usePostgres(test);

type Fn = (r: LedgerReads) => Promise<{ answer: unknown; writes: LedgerWrites | null }>;

const noWrites = (): LedgerWrites => ({ accounts: new Map(), entries: [], holds: new Map(), op: null, minted: null });

async function open(t: ExecutionContext): Promise<HubStorage> {
  const s = await openPostgresStorage(await postgresUrl(t));
  t.teardown(() => s.close().catch(() => {}));
  return s;
}

/** Runs `fns` as one batch (checked with the store's counts); each one's outcome, in order. */
async function inOneBatch(t: ExecutionContext, s: HubStorage, fns: Fn[]): Promise<PromiseSettledResult<unknown>[]> {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let started = 0;
  const blockers = Array.from({ length: 4 }, () =>
    s.ledger.transact(async () => {
      started++;
      await gate;
      return { answer: null, writes: null };
    }),
  );
  while (started < 4) await new Promise((r) => setTimeout(r, 5));
  const before = { ...s.ledger.counts! };
  const ops = Promise.allSettled(fns.map((fn) => s.ledger.transact(fn)));
  release();
  await Promise.all(blockers);
  const outcomes = await ops;
  const after = s.ledger.counts!;
  t.is(after.batches - before.batches, 1, 'the ops ran as one batch');
  t.is(after.batchedOps - before.batchedOps, fns.length);
  t.is(after.fallbacks, before.fallbacks, 'and the batch did not fall back op by op');
  return outcomes;
}

const hold = (from: string, expires: number, state: HoldRecord['state'] = 'held'): HoldRecord => ({
  from,
  to: 'payee',
  amount: '2',
  state,
  at: 1,
  expires,
  tx: `tx-${from}-${expires}`,
});

/** A payer with 10 credits and one open hold of 2, due at 100. */
async function payerWithDueHold(s: HubStorage): Promise<void> {
  await s.ledger.transact(async () => {
    const w = noWrites();
    w.accounts.set('payer', { balance: '10', held: '2', seq: 0 });
    w.holds.set('h-due', hold('payer', 100));
    return { answer: null, writes: w };
  });
}

async function accountOf(s: HubStorage, aid: string) {
  for await (const [id, rec] of s.ledger.accounts()) if (id === aid) return rec;
  return undefined;
}

// Found by review, fixed (OpView.dueOf now reads through Overlay.dueOf). It was: dueOf is read from the transaction alone, never
// through the overlay. An op of a batch is told that a hold an EARLIER op of the same batch already ended
// is still open and due, and is not told of a due hold an earlier op opened; a transaction of its own,
// run after the earlier op committed, answers the reverse (LedgerReads.dueOf: "the OPEN holds of payer
// whose expiry is at or before now"). The Ledger happens to re-read each returned hold's state (Change.account)
// and only opens holds due 24 h later, so it is not hurt today; any other reader of dueOf (or a Ledger
// change that trusts it) would end or count an ended hold a second time — credits returned twice — or
// miss a due one, only when its op happened to be batched.
test('SPEC §11 ledger batches: dueOf in a batch answers as a transaction of its own would after the ops before it (ended holds gone, opened due holds there)', async (t) => {
  const s = await open(t);
  await payerWithDueHold(s);
  const [ended, opened, seen] = await inOneBatch(t, s, [
    // First op: captures the due hold.
    async (r) => {
      const h = (await r.hold('h-due'))!;
      const w = noWrites();
      w.holds.set('h-due', { ...h, state: 'captured' });
      return { answer: 'captured', writes: w };
    },
    // Second op: opens a hold of the payer that is due at 250.
    async (r) => {
      await r.account('payer');
      const w = noWrites();
      w.holds.set('h-new', hold('payer', 200));
      return { answer: 'opened', writes: w };
    },
    // Third op: the payer's due holds at 250.
    async (r) => ({ answer: await r.dueOf('payer', 250), writes: null }),
  ]);
  t.like(ended, { status: 'fulfilled', value: 'captured' });
  t.like(opened, { status: 'fulfilled', value: 'opened' });
  // One transaction after the other: h-due was captured (not open), h-new is open and due at 250.
  t.deepEqual(seen, { status: 'fulfilled', value: ['h-new'] });
});

// Found by review, fixed (Overlay.add copies the op record first, then takes all or nothing). It was: an op's writes are merged into the
// overlay piece by piece — accounts, entries and holds first, then the op record's answer is copied with
// JSON.parse(JSON.stringify(...)). When that copy throws (an answer JSON cannot carry: a bigint, a cycle),
// runBatch records the op as failed, but its accounts, entries and holds are already in the overlay and
// commit with the batch — without its op record, so a retry of the refused op applies them again. Alone
// (PgLedger.once) the same function fails at writeLedger before COMMIT and writes nothing, as
// LedgerStore.transact promises ("commits its writes atomically"; "throws to write nothing").
test('SPEC §11 ledger batches: an op that fails in a batch writes nothing, even when it fails while its writes are being taken', async (t) => {
  const s = await open(t);
  const credit =
    (aid: string, answer: unknown): Fn =>
    async (r) => {
      const a = (await r.account(aid)) ?? { balance: '0', held: '0', seq: 0 };
      const w = noWrites();
      w.accounts.set(aid, { balance: (BigInt(a.balance) + 5n).toString(), held: a.held, seq: a.seq + 1 });
      w.entries.push({ aid, seq: a.seq + 1, bytes: new TextEncoder().encode(`credit ${aid}`) });
      w.op = { key: `credit:${aid}`, digest: 'd', answer };
      return { answer: 'ok', writes: w };
    };
  const [good, bad] = await inOneBatch(t, s, [credit('good', { tx: 'tx-good' }), credit('bad', { tx: 'tx-bad', amount: 5n })]);
  t.like(good, { status: 'fulfilled', value: 'ok' });
  t.is(bad!.status, 'rejected', 'the op whose answer cannot be recorded fails');
  t.is((await accountOf(s, 'bad'))?.balance, undefined, "the failed op's credit is not committed");
  t.deepEqual((await s.ledger.entries([{ aid: 'bad', seq: 1 }]))[0], undefined, 'nor its history entry');
});

// Found by review, fixed (the overlay hands out and keeps copies). It was: the overlay
// keeps an earlier op's account and hold records by reference and hands those same objects to the later
// ops' reads (only op answers are copied, "not the object another op's caller holds"). A later op that
// changes a record it read and is then refused has changed what the earlier op commits: its change is
// written though it threw. Alone, the object it changed belongs to its own transaction and is dropped with
// it. The Ledger copies what it reads (Change), so this is latent: it bites the first transaction
// function that edits a read record in place.
test("SPEC §11 ledger batches: a refused op's change to a record it read is not committed through an earlier op's write", async (t) => {
  const s = await open(t);
  const [first, second] = await inOneBatch(t, s, [
    async () => {
      const w = noWrites();
      w.accounts.set('x', { balance: '5', held: '0', seq: 0 });
      return { answer: 'wrote', writes: w };
    },
    async (r) => {
      const a = (await r.account('x'))!;
      a.balance = '999';
      throw new Error('refused');
    },
  ]);
  t.like(first, { status: 'fulfilled', value: 'wrote' });
  t.is(second!.status, 'rejected');
  t.is((await accountOf(s, 'x'))?.balance, '5', 'what the first op wrote, untouched by the refused one');
});

// The same transactions one by one (each a transaction of its own): what the batches above should match.
test('SPEC §11 ledger batches (control): one by one, dueOf sees the earlier ops, and an op whose answer cannot be recorded writes nothing', async (t) => {
  const s = await open(t);
  await payerWithDueHold(s);
  await s.ledger.transact(async (r) => {
    const w = noWrites();
    w.holds.set('h-due', { ...(await r.hold('h-due'))!, state: 'captured' });
    return { answer: null, writes: w };
  });
  await s.ledger.transact(async (r) => {
    await r.account('payer');
    const w = noWrites();
    w.holds.set('h-new', hold('payer', 200));
    return { answer: null, writes: w };
  });
  t.deepEqual(await s.ledger.transact(async (r) => ({ answer: await r.dueOf('payer', 250), writes: null })), ['h-new']);
  await t.throwsAsync(
    s.ledger.transact(async () => {
      const w = noWrites();
      w.accounts.set('bad', { balance: '5', held: '0', seq: 1 });
      w.entries.push({ aid: 'bad', seq: 1, bytes: new TextEncoder().encode('credit bad') });
      w.op = { key: 'credit:bad', digest: 'd', answer: { amount: 5n } };
      return { answer: 'ok', writes: w };
    }),
  );
  t.is(await accountOf(s, 'bad'), undefined);
});
