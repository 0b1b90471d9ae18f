// The hub storage contract (SPEC §11, issue 19): one suite, run against each backend of
// src/hub/storage/types.ts — PostgreSQL (shared by replicas) and the embedded LevelDB (one process).
// Races are real: many calls at once on one storage, and for PostgreSQL also on TWO storages opened on
// one database, as two hub replicas are. The ledger's races use the test's own tiny transaction (move one
// credit) through LedgerReads/LedgerWrites, so what is tested is the store's atomicity, not the Ledger.
import test, { type ExecutionContext } from 'ava';
import { existsSync } from 'node:fs';
import postgres from 'postgres';
import { MIGRATIONS, SCHEMA_VERSION } from '../src/hub/storage/migrations.js';
import { openPostgresStorage } from '../src/hub/storage/postgres.js';
import {
  type AccountRecord,
  type AgentRecord,
  type HubStorage,
  type LedgerReads,
  type LedgerWrites,
  type MailboxLimits,
  WrongHubError,
} from '../src/hub/storage/types.js';
import { postgresUrl, usePostgres } from './helpers/postgres.js';
import { tempDir } from './helpers/tmp.js';

usePostgres(test);

interface Opened {
  storage: HubStorage;
  /** Another storage on the same store, as a second replica opens it; null for a one-process backend. */
  replica: (() => Promise<HubStorage>) | null;
}

interface Backend {
  name: string;
  /** Whether several storages may open one store at once (PostgreSQL replicas); the races then run on two. */
  replicas: boolean;
  open(t: ExecutionContext): Promise<Opened>;
}

/** Closes `s` when the test ends. */
function closing(t: ExecutionContext, s: HubStorage): HubStorage {
  t.teardown(() => s.close().catch(() => {}));
  return s;
}

const postgresBackend: Backend = {
  name: 'postgres',
  replicas: true,
  async open(t) {
    const url = await postgresUrl(t);
    return {
      storage: closing(t, await openPostgresStorage(url)),
      replica: async () => closing(t, await openPostgresStorage(url)),
    };
  },
};

// ---- Fixtures ----

const bytes = (...xs: number[]) => new Uint8Array(xs);

function agent(aid: string, extra: Partial<AgentRecord> = {}): AgentRecord {
  return {
    aid,
    name: `agent ${aid}`,
    kel: bytes(0xa1, 0, 0xff, 7),
    card: null,
    seq: null,
    digest: null,
    updatedAt: 1_700_000_000_000,
    ...extra,
  };
}

/** A record with its bytes as plain Uint8Arrays (a backend may hand Buffers back: the bytes are what count). */
function plain(rec: AgentRecord | undefined): AgentRecord | undefined {
  if (!rec) return rec;
  const out = { ...rec, kel: new Uint8Array(rec.kel) };
  if (rec.keys) out.keys = new Uint8Array(rec.keys);
  return out;
}

const noWrites = (): LedgerWrites => ({ accounts: new Map(), entries: [], holds: new Map(), op: null, minted: null });

class Refused extends Error {}

/** Credits `amount` to `aid` as a mint would: its account, one history entry, the minted total. */
async function mint(s: HubStorage, aid: string, amount: bigint): Promise<void> {
  await s.ledger.transact(async (r) => {
    const a = (await r.account(aid)) ?? { balance: '0', held: '0', seq: 0 };
    const seq = a.seq + 1;
    const w = noWrites();
    w.accounts.set(aid, { balance: (BigInt(a.balance) + amount).toString(), held: a.held, seq });
    w.entries.push({ aid, seq, bytes: new TextEncoder().encode(`mint ${amount} seq ${seq}`) });
    w.minted = (BigInt(await r.minted()) + amount).toString();
    return { answer: null, writes: w };
  });
}

/** Moves one credit from `from` to `to` under op key `key`, refusing when `from` has none; answered once per key. */
function moveOne(from: string, to: string, key: string) {
  return async (r: LedgerReads): Promise<{ answer: string; writes: LedgerWrites | null }> => {
    const done = await r.op(key);
    if (done) return { answer: (done.answer as { tx: string }).tx, writes: null };
    const [a, b] = await Promise.all([r.account(from), r.account(to)]);
    if (!a || BigInt(a.balance) < 1n) throw new Refused(`${from} has no credit`);
    const payee: AccountRecord = b ?? { balance: '0', held: '0', seq: 0 };
    const w = noWrites();
    const tx = `tx-${key}`;
    w.accounts.set(from, { balance: (BigInt(a.balance) - 1n).toString(), held: a.held, seq: a.seq + 1 });
    w.accounts.set(to, { balance: (BigInt(payee.balance) + 1n).toString(), held: payee.held, seq: payee.seq + 1 });
    w.entries.push({ aid: from, seq: a.seq + 1, bytes: new TextEncoder().encode(`${tx} out`) });
    w.entries.push({ aid: to, seq: payee.seq + 1, bytes: new TextEncoder().encode(`${tx} in`) });
    w.op = { key, digest: `digest-${key}`, answer: { tx } };
    return { answer: tx, writes: w };
  };
}

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

/** `n` calls spread over the storages given, all started at once; each call's outcome. */
function race<T>(stores: HubStorage[], n: number, call: (s: HubStorage, i: number) => Promise<T>) {
  return Promise.allSettled(Array.from({ length: n }, (_, i) => call(stores[i % stores.length]!, i)));
}

const fulfilled = <T>(rs: PromiseSettledResult<T>[]) => rs.filter((r): r is PromiseFulfilledResult<T> => r.status === 'fulfilled');

/** The storages a race runs on: one, or two replicas of one database where the backend has them. */
async function racers(opened: Opened, two: boolean): Promise<HubStorage[]> {
  return two && opened.replica ? [opened.storage, await opened.replica()] : [opened.storage];
}

// ---- The contract ----

function contract(backend: Backend): void {
  const title = (what: string) => `[${backend.name}] SPEC §11 hub storage: ${what}`;

  test(title('agents: put and get round-trip every field, bytes exact'), async (t) => {
    const { storage: s } = await backend.open(t);
    t.is(await s.agents.get('nobody'), undefined);
    const rec = agent('aid-1', {
      card: '{"name":"x","description":"ü ✓"}',
      seq: '18446744073709551617',
      digest: 'ab'.repeat(32),
      keys: bytes(0, 1, 2, 0xfe, 0xff),
      kel: new Uint8Array(Array.from({ length: 300 }, (_, i) => i % 256)),
    });
    await s.agents.put(rec);
    t.deepEqual(plain(await s.agents.get('aid-1')), rec);
    // Withdrawn: the card goes, the high-water mark stays.
    const withdrawn = { ...rec, card: null, updatedAt: rec.updatedAt + 1 };
    await s.agents.put(withdrawn);
    t.deepEqual(plain(await s.agents.get('aid-1')), withdrawn);
    // A record without keys reads back without them.
    const noKeys = agent('aid-2');
    await s.agents.put(noKeys);
    t.deepEqual(plain(await s.agents.get('aid-2')), noKeys);
  });

  test(title('agents: every write, put or admit, keeps the directory index; a withdrawn card leaves it'), async (t) => {
    const { storage: s } = await backend.open(t);
    const card = (name: string, description: string) =>
      JSON.stringify({ name, description, skills: [{ id: `${name}-skill`, name, tags: ['demo'] }] });
    const query = (words: string[], cursor: string | null = null, limit = 20) => ({ words, skill: null, tag: null, limit, cursor });
    const aids = async (words: string[]) => (await s.agents.search(query(words))).agents.map((a) => a.aid);
    await s.agents.put(agent('aid-b', { name: 'helper', card: card('helper', 'I can translate a letter now and then') }));
    await s.agents.invite('inv', { createdAt: 1, usedBy: null, usedAt: null });
    t.is(await s.agents.admit(agent('aid-t', { name: 'translator', card: card('translator', 'words') }), 'inv', 2), 'ok');
    await s.agents.put(agent('aid-c', { name: 'cook', card: card('cook', 'recipes') }));
    await s.agents.put(agent('aid-n', { name: 'translate-nocard' }));
    t.deepEqual(await aids(['transl']), ['aid-t', 'aid-b'], 'the name first, the description after; no card, not listed');
    t.deepEqual(await aids(['cook', 'recipes']), ['aid-c']);
    t.deepEqual(await aids(['cook', 'letter']), [], 'every word must match');
    const first = await s.agents.search(query(['transl'], null, 1));
    t.deepEqual(
      first.agents.map((a) => a.aid),
      ['aid-t'],
    );
    t.deepEqual(plain(first.agents[0]), agent('aid-t', { name: 'translator', card: card('translator', 'words') }));
    const second = await s.agents.search(query(['transl'], first.next, 1));
    t.deepEqual(
      second.agents.map((a) => a.aid),
      ['aid-b'],
    );
    await s.agents.put(agent('aid-t', { name: 'translator', card: null, seq: '2', digest: 'd' }));
    t.deepEqual(await aids(['transl']), ['aid-b']);
  });

  test(title('agents: isRecipient only for a registered AID with keys'), async (t) => {
    const { storage: s } = await backend.open(t);
    await s.agents.put(agent('no-keys'));
    await s.agents.put(agent('with-keys', { keys: bytes(1) }));
    t.false(await s.agents.isRecipient('unknown'));
    t.false(await s.agents.isRecipient('no-keys'));
    t.true(await s.agents.isRecipient('with-keys'));
    await s.agents.put(agent('no-keys', { keys: bytes(2) }));
    t.true(await s.agents.isRecipient('no-keys'));
  });

  const spreads = backend.replicas ? [false, true] : [false];

  for (const two of spreads) {
    const where = two ? 'two replicas' : 'one storage';
    test(title(`admit: 10 registrations racing on one invite (${where}), exactly one ok`), async (t) => {
      const opened = await backend.open(t);
      const stores = await racers(opened, two);
      await opened.storage.agents.invite('invite-1', { createdAt: 1, usedBy: null, usedAt: null });
      t.is(await opened.storage.agents.admit(agent('x'), 'no-such-invite', 2), 'unknown');
      const rs = await race(stores, 10, (s, i) => s.agents.admit(agent(`racer-${i}`), 'invite-1', 100 + i));
      const answers = fulfilled(rs).map((r) => r.value);
      t.is(answers.length, 10);
      t.is(answers.filter((a) => a === 'ok').length, 1);
      t.is(answers.filter((a) => a === 'used').length, 9);
      const winner = answers.indexOf('ok');
      for (let i = 0; i < 10; i++) {
        const rec = await opened.storage.agents.get(`racer-${i}`);
        if (i === winner) t.deepEqual(plain(rec), agent(`racer-${i}`));
        else t.is(rec, undefined, `the loser racer-${i} was not written`);
      }
      t.is(await opened.storage.agents.admit(agent('late'), 'invite-1', 500), 'used');
      t.is(await opened.storage.agents.get('x'), undefined);
      // An AID registered meanwhile is never overwritten by an invited first registration; the invite stays unspent.
      await opened.storage.agents.invite('invite-2', { createdAt: 1, usedBy: null, usedAt: null });
      t.is(await opened.storage.agents.admit(agent(`racer-${winner}`, { name: 'other' }), 'invite-2', 600), 'exists');
      t.deepEqual(plain(await opened.storage.agents.get(`racer-${winner}`)), agent(`racer-${winner}`));
      t.is(await opened.storage.agents.admit(agent('fresh'), 'invite-2', 700), 'ok', 'the invite was not spent');
    });

    test(title(`agents: 20 updates racing on one AID (${where}), absent at first, none lost`), async (t) => {
      const opened = await backend.open(t);
      const stores = await racers(opened, two);
      // Each appends its mark to the name: an update made from a stale read would drop another's.
      const rs = await race(stores, 20, (s, i) =>
        s.agents.update('aid-u', (cur) => ({ ...(cur ?? agent('aid-u', { name: '' })), name: `${cur?.name ?? ''}.${i}` })),
      );
      t.is(fulfilled(rs).length, 20, String(rs.find((r) => r.status === 'rejected')?.reason));
      const marks = (await opened.storage.agents.get('aid-u'))!.name.split('.').filter(Boolean);
      t.deepEqual(
        marks.map(Number).sort((x, y) => x - y),
        Array.from({ length: 20 }, (_, i) => i),
      );
      t.is(await opened.storage.agents.update('aid-u', () => null), null, 'null writes nothing');
      const refused = await t.throwsAsync(
        opened.storage.agents.update('aid-u', () => {
          throw new Error('refused');
        }),
      );
      t.is(refused?.message, 'refused');
      t.is((await opened.storage.agents.get('aid-u'))!.name.split('.').filter(Boolean).length, 20);
    });

    test(title(`nonces: 20 claims of one nonce racing (${where}), exactly one true; prune forgets`), async (t) => {
      const opened = await backend.open(t);
      const stores = await racers(opened, two);
      const rs = await race(stores, 20, (s) => s.nonces.claim('aid-n', 'nonce-1', 1000));
      const answers = fulfilled(rs).map((r) => r.value);
      t.is(answers.length, 20);
      t.is(answers.filter(Boolean).length, 1);
      t.true(await opened.storage.nonces.claim('aid-other', 'nonce-1', 1000), 'a nonce is per AID');
      t.true(await opened.storage.nonces.claim('aid-n', 'nonce-2', 5000));
      await opened.storage.nonces.prune(2000);
      t.true(await opened.storage.nonces.claim('aid-n', 'nonce-1', 6000), 'pruned: seen again as new');
      t.false(await opened.storage.nonces.claim('aid-n', 'nonce-2', 6000), 'newer than the prune: kept');
    });

    test(title(`ledger: 50 transactions racing to move 1 credit out of 10 (${where}), exactly 10 succeed`), async (t) => {
      const opened = await backend.open(t);
      const stores = await racers(opened, two);
      const s = opened.storage;
      await mint(s, 'payer', 10n);
      const rs = await race(stores, 50, (st, i) => st.ledger.transact(moveOne('payer', 'payee', `move:${i}`)));
      const ok = fulfilled(rs);
      t.is(ok.length, 10);
      for (const r of rs) if (r.status === 'rejected') t.true(r.reason instanceof Refused, String(r.reason));
      const accounts = new Map(await collect(s.ledger.accounts()));
      t.is(accounts.get('payer')?.balance, '0');
      t.is(accounts.get('payee')?.balance, '10');
      t.is(accounts.get('payer')?.seq, 11);
      t.is(accounts.get('payee')?.seq, 10);
      t.is(await s.ledger.minted(), '10');
      t.is(await s.ledger.heldTotal(), 0n);
      // History: every account's seqs from 1 without a gap, in (aid, seq) order.
      const history = await collect(s.ledger.history());
      t.deepEqual(
        history.map((h) => `${h.aid}:${h.seq}`),
        [...Array.from({ length: 10 }, (_, i) => `payee:${i + 1}`), ...Array.from({ length: 11 }, (_, i) => `payer:${i + 1}`)],
      );
      const recent = await s.ledger.recent('payer', 3);
      t.deepEqual(
        recent.map((b) => new TextDecoder().decode(b)),
        history
          .filter((h) => h.aid === 'payer')
          .slice(-3)
          .map((h) => new TextDecoder().decode(h.bytes)),
      );
      const [first, missing] = await s.ledger.entries([
        { aid: 'payer', seq: 1 },
        { aid: 'payer', seq: 12 },
      ]);
      t.is(new TextDecoder().decode(first), 'mint 10 seq 1');
      t.is(missing, undefined);
    });

    test(title(`ledger: one op key answered once when its transactions race (${where})`), async (t) => {
      const opened = await backend.open(t);
      const stores = await racers(opened, two);
      const s = opened.storage;
      await mint(s, 'payer', 5n);
      const rs = await race(stores, 8, (st) => st.ledger.transact(moveOne('payer', 'payee', 'move:same')));
      t.deepEqual(
        rs.map((r) => (r.status === 'fulfilled' ? r.value : String(r.reason))),
        Array(8).fill('tx-move:same'),
      );
      const accounts = new Map(await collect(s.ledger.accounts()));
      t.is(accounts.get('payer')?.balance, '4', 'moved once');
      t.is(accounts.get('payee')?.balance, '1');
    });
  }

  test(title('ledger: a transaction that throws writes nothing; holds are due by expiry, per payer'), async (t) => {
    const { storage: s } = await backend.open(t);
    await t.throwsAsync(
      s.ledger.transact(async () => {
        throw new Refused('no');
      }),
      { instanceOf: Refused },
    );
    t.deepEqual(await collect(s.ledger.accounts()), []);
    t.is(await s.ledger.minted(), '0');
    const hold = (from: string | null, amount: string, expires: number | null, state: 'held' | 'captured' | 'void' = 'held') => ({
      from,
      to: 'payee',
      amount,
      state,
      at: 1,
      expires,
      tx: `tx-${from}-${amount}`,
    });
    await s.ledger.transact(async () => {
      const w = noWrites();
      w.holds.set('h1', hold('alice', '3', 100));
      w.holds.set('h2', hold('bob', '4', 200));
      w.holds.set('h3', hold('alice', '5', 300));
      w.holds.set('h4', hold('alice', '6', 50, 'captured'));
      w.holds.set('h5', hold(null, '0', null, 'void'));
      return { answer: null, writes: w };
    });
    t.deepEqual(await s.ledger.due(250, 10), ['h1', 'h2']);
    t.deepEqual(await s.ledger.due(1000, 2), ['h1', 'h2'], 'limit');
    t.is(await s.ledger.heldTotal(), 12n);
    const seen = await s.ledger.transact(async (r) => ({
      answer: { alice: await r.dueOf('alice', 250), bob: await r.dueOf('bob', 150), h5: await r.hold('h5'), h3: await r.hold('h3') },
      writes: null,
    }));
    t.deepEqual(seen, { alice: ['h1'], bob: [], h5: hold(null, '0', null, 'void'), h3: hold('alice', '5', 300) });
    await s.ledger.transact(async () => {
      const w = noWrites();
      w.holds.set('h1', { ...hold('alice', '3', 100), state: 'captured' });
      return { answer: null, writes: w };
    });
    t.deepEqual(await s.ledger.due(250, 10), ['h2']);
    t.is(await s.ledger.heldTotal(), 9n);
  });

  test(title('ledger: history and accounts stream in order past one batch; a reader stopping early frees the store'), async (t) => {
    const { storage: s } = await backend.open(t);
    const n = 2500;
    await s.ledger.transact(async () => {
      const w = noWrites();
      w.accounts.set('long', { balance: '0', held: '0', seq: n });
      for (let seq = 1; seq <= n; seq++) w.entries.push({ aid: 'long', seq, bytes: new TextEncoder().encode(`entry ${seq}`) });
      for (let i = 0; i < 30; i++) w.accounts.set(`acct-${String(i).padStart(2, '0')}`, { balance: String(i), held: '0', seq: 0 });
      // Code-unit order ('Z' < 'a'), as LevelDB's keys sort, not a locale's.
      w.accounts.set('Zed', { balance: '0', held: '0', seq: 1 });
      w.entries.push({ aid: 'Zed', seq: 1, bytes: bytes(1) });
      return { answer: null, writes: w };
    });
    const history = await collect(s.ledger.history());
    t.is(history.length, n + 1);
    t.is(history[0]!.aid, 'Zed');
    t.true(history.slice(1).every((h, i) => h.aid === 'long' && h.seq === i + 1 && new TextDecoder().decode(h.bytes) === `entry ${i + 1}`));
    const accounts = await collect(s.ledger.accounts());
    t.deepEqual(
      accounts.map(([aid]) => aid),
      ['Zed', ...Array.from({ length: 30 }, (_, i) => `acct-${String(i).padStart(2, '0')}`), 'long'],
    );
    // More early stops than a pool has connections: each must give its connection back.
    for (let i = 0; i < 25; i++) {
      for await (const _ of s.ledger.history()) break;
      for await (const _ of s.ledger.accounts()) break;
    }
    t.is(await s.ledger.minted(), '0');
    t.is((await s.ledger.recent('long', 2)).length, 2);
  });

  const limits: MailboxLimits = { perRecipient: 3, perRecipientBytes: 100, totalBytes: 250 };
  const env = (n: number, fill: number) => new Uint8Array(n).fill(fill);

  test(title('mailbox: kept oldest first, one copy per id, acknowledged, expired, bounded'), async (t) => {
    const { storage: s } = await backend.open(t);
    const m = s.mailbox;
    t.is(await m.put('bob', 'id-3', env(10, 3), 1000, limits), 'kept');
    t.is(await m.put('bob', 'id-1', env(20, 1), 500, limits), 'kept');
    t.is(await m.put('bob', 'id-1', env(20, 1), 500, limits), 'kept', 'the same id again');
    t.deepEqual(await m.size(), { envelopes: 2, bytes: 30 });
    t.deepEqual(await m.list('bob', 0), [
      { id: 'id-3', bytes: env(10, 3) },
      { id: 'id-1', bytes: env(20, 1) },
    ]);
    t.deepEqual(await m.list('carol', 0), []);
    // Per recipient: 3 envelopes, 100 bytes.
    t.is(await m.put('bob', 'id-2', env(71, 2), 1000, limits), 'full', '30 + 71 bytes > 100');
    t.is(await m.put('bob', 'id-2', env(70, 2), 1000, limits), 'kept');
    t.is(await m.put('bob', 'id-4', env(1, 4), 1000, limits), 'full', 'a fourth envelope');
    // In all: 250 bytes.
    t.is(await m.put('carol', 'c-1', env(100, 5), 1000, limits), 'kept');
    t.is(await m.put('dave', 'd-1', env(51, 6), 1000, limits), 'full', '200 + 51 > 250');
    t.is(await m.put('dave', 'd-1', env(50, 6), 1000, limits), 'kept');
    t.deepEqual(await m.size(), { envelopes: 5, bytes: 250 });
    // Acknowledged: named ids go, unknown ones are ignored; another recipient's ids are not touched.
    t.is(await m.ack('bob', ['id-3', 'nope', 'c-1']), 1);
    t.is(await m.ack('bob', []), 0);
    t.deepEqual(
      (await m.list('bob', 0)).map((x) => x.id),
      ['id-1', 'id-2'],
    );
    t.deepEqual(await m.size(), { envelopes: 4, bytes: 240 });
    t.is(await m.put('bob', 'id-4', env(1, 4), 1000, limits), 'kept', 'room again after the ack');
    // Expiry: unlisted once expired, deleted by the sweep.
    t.deepEqual(
      (await m.list('bob', 500)).map((x) => x.id),
      ['id-2', 'id-4'],
      'expires at 500: gone at 500',
    );
    t.is(await m.sweep(499), 0);
    t.is(await m.sweep(500), 1);
    t.deepEqual(await m.size(), { envelopes: 4, bytes: 221 });
    t.is(await m.sweep(1000), 4);
    t.deepEqual(await m.size(), { envelopes: 0, bytes: 0 });
    t.is(await m.put('bob', 'id-5', env(100, 7), 2000, limits), 'kept', 'the counters are back to nothing');
  });

  for (const two of spreads) {
    const where = two ? 'two replicas' : 'one storage';
    test(title(`mailbox: 20 puts racing (${where}) never pass a bound`), async (t) => {
      const opened = await backend.open(t);
      const stores = await racers(opened, two);
      const rs = await race(stores, 20, (s, i) => s.mailbox.put('bob', `b-${i}`, env(10, i), 1000, limits));
      t.is(fulfilled(rs).filter((r) => r.value === 'kept').length, 3, 'per recipient: 3');
      const big = { ...limits, perRecipient: 100, perRecipientBytes: 1000 };
      const rs2 = await race(stores, 20, (s, i) => s.mailbox.put(`r-${i}`, `x-${i}`, env(40, i), 1000, big));
      // 30 bytes are Bob's: 220 left, five envelopes of 40.
      t.is(fulfilled(rs2).filter((r) => r.value === 'kept').length, 5, 'in all: 250 bytes');
      t.deepEqual(await opened.storage.mailbox.size(), { envelopes: 8, bytes: 230 });
    });
  }

  test(title('bind: the first hub identity is kept, another is refused in one line'), async (t) => {
    const opened = await backend.open(t);
    await opened.storage.bind('hub-A');
    await opened.storage.bind('hub-A');
    const err = await t.throwsAsync(opened.storage.bind('hub-B'), { instanceOf: WrongHubError });
    t.regex(err!.message, /belongs to hub hub-A, not to this hub's identity hub-B/);
    t.false(err!.message.includes('\n'));
    if (opened.replica) await t.throwsAsync((await opened.replica()).bind('hub-B'), { instanceOf: WrongHubError });
  });
}

contract(postgresBackend);

// The LevelDB backend, once src/hub/storage/level.ts is there (written beside this suite); loaded by its
// first test, as ava takes every test declared synchronously.
if (existsSync(new URL('../src/hub/storage/level.ts', import.meta.url))) {
  const levelPath = '../src/hub/storage/level.js';
  contract({
    name: 'leveldb',
    replicas: false,
    async open(t) {
      const { openLevelStorage } = (await import(levelPath)) as { openLevelStorage(dir: string): Promise<HubStorage> };
      return { storage: closing(t, await openLevelStorage(await tempDir(t, 'anet-hub-storage-'))), replica: null };
    },
  });
}

// ---- PostgreSQL only: its schema ----

async function admin(t: ExecutionContext, url: string) {
  const sql = postgres(url, { onnotice: () => {} });
  t.teardown(() => sql.end());
  return sql;
}

test('[postgres] SPEC §11 hub storage: two replicas opening one empty database at once apply each migration once', async (t) => {
  const url = await postgresUrl(t);
  const [a, b] = await Promise.all([openPostgresStorage(url), openPostgresStorage(url)]);
  closing(t, a);
  closing(t, b);
  const sql = await admin(t, url);
  const rows = await sql<{ version: number }[]>`select version from schema_migrations order by version`;
  t.deepEqual(
    rows.map((r) => r.version),
    MIGRATIONS.map((m) => m.version),
  );
  // Both work on the one schema.
  await a.agents.put(agent('seen-by-both'));
  t.deepEqual(plain(await b.agents.get('seen-by-both')), agent('seen-by-both'));
  // A third start finds nothing to apply.
  closing(t, await openPostgresStorage(url));
  t.is((await sql`select version from schema_migrations`).length, MIGRATIONS.length);
});

test('[postgres] SPEC §11 hub storage: a database with a newer schema is refused in one line', async (t) => {
  const url = await postgresUrl(t);
  await (await openPostgresStorage(url)).close();
  const sql = await admin(t, url);
  await sql`insert into schema_migrations (version, name, applied_at) values (${SCHEMA_VERSION + 1}, 'from the future', 0)`;
  const err = await t.throwsAsync(openPostgresStorage(url));
  t.is(err!.name, 'SchemaTooNewError');
  t.true(err!.message.includes(`schema version ${SCHEMA_VERSION + 1}, newer than version ${SCHEMA_VERSION}`), err!.message);
  t.regex(err!.message, /upgrade this hub/);
  t.false(err!.message.includes('anet-test'), 'the password is not in the message');
  t.false(err!.message.includes('\n'));
});

test('[postgres] SPEC §11 hub storage: where names the database without its password; a bad URL fails in one line', async (t) => {
  const url = await postgresUrl(t);
  const s = closing(t, await openPostgresStorage(url));
  t.is(s.kind, 'postgres');
  t.false(s.where.includes('anet-test'));
  t.true(s.where.includes('***'));
  const port = new URL(url).port;
  const err = await t.throwsAsync(openPostgresStorage(`postgres://anet:secret@127.0.0.1:${port}/no_such_database`));
  t.regex(err!.message, /^cannot open the hub database at postgres:\/\/anet:\*\*\*@127\.0\.0\.1:\d+\/no_such_database: /);
  t.false(err!.message.includes('secret'));
});
