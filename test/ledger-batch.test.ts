// Ledger batches on PostgreSQL (SPEC §11, issue 19): ledger ops that wait while a replica's transactions
// are all under way run together, one after another, in one transaction (src/hub/storage/ledger-batch.ts).
// Each must read what the ops before it wrote, answer for itself, keep its request nonce's claim when it is
// refused, and a database error in one must not become another's answer.
import test, { type ExecutionContext } from 'ava';
import { openPostgresStorage } from '../src/hub/storage/postgres.js';
import type { HubStorage, LedgerPlan, LedgerReads, LedgerWrites, RequestNonce } from '../src/hub/storage/types.js';
import { postgresUrl, usePostgres } from './helpers/postgres.js';

usePostgres(test);

class Refused extends Error {}

const noWrites = (): LedgerWrites => ({ accounts: new Map(), entries: [], holds: new Map(), op: null, minted: null });

async function open(t: ExecutionContext): Promise<HubStorage> {
  const s = await openPostgresStorage(await postgresUrl(t));
  t.teardown(() => s.close().catch(() => {}));
  return s;
}

/**
 * Adds 1 to `aid`'s balance under op key `key` (a key seen before answers its recorded tx), declaring its
 * reads first when `plan` is given; `refuse` throws after reading, as a refused op does.
 */
function addOne(aid: string, key: string, opts: { plan?: Omit<LedgerPlan, 'at'>; refuse?: boolean } = {}) {
  return async (r: LedgerReads): Promise<{ answer: string; writes: LedgerWrites | null }> => {
    if (opts.plan && !(await r.prefetch({ ...opts.plan, at: 1000 }))) throw new Refused('replayed');
    const done = await r.op(key);
    if (done) return { answer: (done.answer as { tx: string }).tx, writes: null };
    const a = (await r.account(aid)) ?? { balance: '0', held: '0', seq: 0 };
    if (opts.refuse) throw new Refused(`refused ${key}`);
    const w = noWrites();
    const seq = a.seq + 1;
    w.accounts.set(aid, { balance: (BigInt(a.balance) + 1n).toString(), held: a.held, seq });
    w.entries.push({ aid, seq, bytes: new TextEncoder().encode(`${key} seq ${seq}`) });
    w.op = { key, digest: `d-${key}`, answer: { tx: `tx-${key}` } };
    return { answer: `tx-${key}`, writes: w };
  };
}

async function accountOf(s: HubStorage, aid: string) {
  for await (const [id, rec] of s.ledger.accounts()) if (id === aid) return rec;
  return undefined;
}

async function historyOf(s: HubStorage, aid: string): Promise<string[]> {
  const out: string[] = [];
  for await (const h of s.ledger.history()) if (h.aid === aid) out.push(new TextDecoder().decode(h.bytes));
  return out;
}

test('SPEC §11 ledger batches: 40 ops at once on one account each read the ones before them: none lost, each answer its own, refusals write nothing', async (t) => {
  const s = await open(t);
  await s.ledger.transact(addOne('acct', 'add:first'));
  const refused = (i: number) => i % 7 === 3;
  // How often each op's function ran: a batch the database kept failing would run each ~20 times (its
  // retries) before running them alone, which would still answer right; only a race runs one again.
  const runs = new Array<number>(40).fill(0);
  const counted = (i: number, fn: ReturnType<typeof addOne>) => (r: LedgerReads) => {
    runs[i]!++;
    return fn(r);
  };
  // Half declare their reads (they join the batch's one prefetch), half read as they go; some repeat a key.
  const key = (i: number) => (i % 10 === 9 ? `add:${i - 1}` : `add:${i}`);
  const rs = await Promise.allSettled(
    Array.from({ length: 40 }, (_, i) =>
      s.ledger.transact(
        counted(i, addOne('acct', key(i), { refuse: refused(i), ...(i % 2 ? { plan: { op: key(i), accounts: ['acct'] } } : {}) })),
      ),
    ),
  );
  rs.forEach((r, i) => {
    if (refused(i)) t.true(r.status === 'rejected' && r.reason instanceof Refused, `op ${i} refused`);
    else t.deepEqual(r, { status: 'fulfilled', value: `tx-${key(i)}` }, `op ${i} answers its own key`);
  });
  t.true(Math.max(...runs) < 5, `each op ran once, or again after a lost race (runs: ${runs.join(' ')})`);
  const counts = s.ledger.counts!;
  t.true(counts.batches > 0 && counts.batchedOps > counts.batches, 'ops that waited went together');
  t.is(counts.fallbacks, 0, 'no batch failed');
  const added = new Set([
    'add:first',
    ...Array.from({ length: 40 }, (_, i) => i)
      .filter((i) => !refused(i))
      .map(key),
  ]);
  const rec = await accountOf(s, 'acct');
  t.is(rec?.balance, String(added.size), 'one credit per key that was not refused: none lost, none twice');
  t.is(rec?.seq, added.size);
  const history = await historyOf(s, 'acct');
  t.deepEqual(
    history.map((h) => h.split(' seq ')[1]),
    Array.from({ length: added.size }, (_, i) => String(i + 1)),
    'seqs from 1 without a gap: each op read the seq the one before it wrote',
  );
  t.deepEqual(history.map((h) => h.split(' seq ')[0]!).sort(), [...added].sort(), 'one entry per key that was not refused');
});

test('SPEC §11 ledger batches: a database error in one op fails that op alone; the others commit', async (t) => {
  const s = await open(t);
  const bad = 10;
  const rs = await Promise.allSettled(
    Array.from({ length: 16 }, (_, i) =>
      s.ledger.transact(
        i === bad
          ? async (r: LedgerReads) => {
              // PostgreSQL refuses a NUL byte in text: the statement fails, and with it the transaction.
              await r.account('bad\u0000aid');
              return { answer: 'read', writes: null };
            }
          : addOne('acct', `add:${i}`, { plan: { op: `add:${i}`, accounts: ['acct'] } }),
      ),
    ),
  );
  rs.forEach((r, i) => {
    if (i === bad) t.true(r.status === 'rejected' && !(r.reason instanceof Refused), 'the op whose read failed fails');
    else t.deepEqual(r, { status: 'fulfilled', value: `tx-add:${i}` }, `op ${i} is not failed by another's error`);
  });
  t.is((await accountOf(s, 'acct'))?.balance, '15');
  t.true(s.ledger.counts!.fallbacks > 0, "the bad op's batch was run again op by op");
});

test('SPEC §11 ledger batches: ops that declare no plan batch too, reading as they go', async (t) => {
  const s = await open(t);
  await s.ledger.transact(addOne('acct', 'add:first'));
  const rs = await Promise.all(Array.from({ length: 30 }, (_, i) => s.ledger.transact(addOne('acct', `add:${i}`))));
  t.deepEqual(
    rs,
    Array.from({ length: 30 }, (_, i) => `tx-add:${i}`),
  );
  t.is((await accountOf(s, 'acct'))?.balance, '31');
  const counts = s.ledger.counts!;
  t.true(counts.batches > 0, 'some went together');
  t.is(counts.fallbacks, 0, 'and no batch failed for lack of a plan');
});

test("SPEC §11 ledger batches: of ops claiming one request nonce at once, one takes it; a refused op's claim stays taken", async (t) => {
  const s = await open(t);
  const claims: RequestNonce[] = Array.from({ length: 16 }, (_, i) => ({ aid: 'signer', nonce: i % 2 ? 'same' : `n${i}`, time: 1000 }));
  const rs = await Promise.allSettled(
    claims.map((claim, i) =>
      s.ledger.transact(addOne('acct', `add:${i}`, { plan: { op: `add:${i}`, accounts: ['acct'], claim }, refuse: i % 4 === 0 })),
    ),
  );
  const taken = claims.filter((c) => c.taken);
  t.is(taken.filter((c) => c.nonce === 'same').length, 1, "one of the copies' claims is taken");
  t.is(taken.filter((c) => c.nonce !== 'same').length, 8, 'every distinct nonce is taken, refused ops too');
  rs.forEach((r, i) => {
    const replayed = r.status === 'rejected' && r.reason instanceof Refused && r.reason.message === 'replayed';
    t.is(replayed, !claims[i]!.taken, `op ${i}: refused as replayed exactly when its claim was not taken`);
  });
  for (let i = 0; i < 16; i += 4) t.false(await s.nonces.claim('signer', `n${i}`, 1000), `refused op ${i}'s nonce stays claimed`);
  t.false(await s.nonces.claim('signer', 'same', 1000));
});
