// The hub's ledger of credits (SPEC §10, §11): balances per AID; holds made from a payer's signed
// authorization, captured to the payee or released back; the operator's mint. Every op is idempotent:
// the hub keeps, per key (`mint:<nonce>`, `hold:<authorization nonce>`, `settle:<hold>`), the digest of
// the op's body and the answer it gave, so a retry gets the same answer and a different body under a
// used key is refused (`NONCE_REUSED`; for a hold already settled, under another nonce or the other way,
// `HOLD_SETTLED`). A settlement is keyed by its hold, so no party can block it by spending its nonce first. Only ops that changed the
// ledger are recorded; a refusal changes nothing and is decided again on retry.
//
// Amounts are canonical decimal strings wherever they are stored or sent and BigInt only while computing,
// so msgpackr never meets a bigint and JSON never a float. Each op is one LevelDB batch (accounts, hold,
// history, nonce record), and ops run one at a time, so each read-modify-write sees the one before it.
// The ledger never learns what a payment bought: an authorization names no skill, and nothing here does.
//
// Integrity (issue 18, item 2): each account's history is a hash chain. An entry stores `prev`, the
// sha256 of the stored bytes of the entry before it (null for seq 1), and the account record `head`, that
// of its newest entry; entries are packed here so the hash is over the exact bytes stored (msgpackr is not
// canonical: this is a local check of our own bytes, never a signature). The hub checks every account's
// newest entry at start (`checkLedger` fast: present, nothing past it, its hash the head) and refuses to
// run on a damaged ledger; `anet replay --verify --data <hubdir>` checks every entry (seq continuity per
// account and the chain). Entries written before the chain existed have no `prev`: the chain of an
// account starts at its first entry written by this version, whose `prev` hashes the old newest entry.
import { randomHex } from '../util/random.js';
import { sha256 } from '@noble/hashes/sha2.js';
import type { HubStore } from './store.js';
import { timeKey } from '../../store/db.js';
import { pack, unpack } from '../../store/codec.js';
import { dirname } from 'node:path';
import { KeyedSerial } from '../runtime/serial.js';
import { validateKel } from '../identity/kel.js';
import { MAX_AMOUNT, isAmount, peekAuthorization, readAuthorization } from '../protocol/authorization.js';
import type { MintAnswer, HoldAnswer, SettleAnswer, HistoryKind, HistoryEntry, Account } from '../protocol/hub-api.js';

/** A hold not settled within this is released to the payer. */
export const HOLD_TTL_MS = 24 * 3_600_000;
/** An account answer carries this many history entries at most (the newest). */
export const HISTORY_LIMIT = 100;

const NONCE = /^[0-9a-f]{32}$/;

/** A refusal, with the HTTP status and code the hub answers it with. */
export class LedgerRefused extends Error {
  override name = 'LedgerRefused';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export interface Totals {
  minted: bigint;
  balances: bigint;
  held: bigint;
}

interface AccountRecord {
  balance: string;
  held: string;
  seq: number;
  /** sha256 (hex) of the stored bytes of the entry at `seq`; absent while only older versions wrote. */
  head?: string;
}

/** A history entry as stored: `prev` links it to the entry before (absent in entries of older versions). */
type StoredEntry = HistoryEntry & { prev?: string | null };

/** The hub refuses to run on a damaged ledger: one line with the data dir, the account and seq, what to do. */
export class LedgerDamagedError extends Error {
  override name = 'LedgerDamagedError';
  constructor(
    readonly dataDir: string,
    readonly aid: string,
    readonly seq: number,
    readonly problem: string,
  ) {
    super(
      `the ledger in ${dataDir} is damaged: the history of ${aid} from seq ${seq} (${problem}); acknowledged ledger entries are lost or altered, so the hub will not run on it: ` +
        `restore ${dataDir} from a backup made before the damage (\`anet replay --verify --data ${dataDir}\` checks every entry)`,
    );
  }
}

type HoldState = 'held' | 'captured' | 'released' | 'expired' | 'void';

interface HoldRecord {
  /** null for a `void` tombstone: the hub never saw the authorization. */
  from: string | null;
  to: string;
  amount: string;
  state: HoldState;
  at: number;
  /** When an open hold is released to the payer; null for a tombstone. */
  expires: number | null;
  tx: string;
}

interface OpRecord {
  digest: string;
  answer: unknown;
}

type Write =
  | { type: 'put'; sublevel: unknown; key: string; value: unknown; valueEncoding?: 'buffer' }
  | { type: 'del'; sublevel: unknown; key: string };

const MINTED = 'ledger-minted';
const newTx = () => `tx_${randomHex(16)}`;
const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');
/** Mint and settle bodies are digested as tagged lines; a hold's digest is that of its authorization bytes. */
const digestOf = (...fields: string[]) => hex(sha256(new TextEncoder().encode(`anet-ledger/v1\n${fields.join('\n')}`)));
const historyKey = (aid: string, seq: number) => `${aid}!${seq.toString().padStart(16, '0')}`;
const expiryKey = (expires: number, hold: string) => `${timeKey(expires)}!${hold}`;

/** One op's writes: accounts are read once and written once, however many entries touch them. */
class Change {
  readonly tx = newTx();
  readonly writes: Write[] = [];
  private readonly accounts = new Map<string, { balance: bigint; held: bigint; seq: number; head: string | undefined }>();

  constructor(
    private readonly store: HubStore,
    readonly at: number,
  ) {}

  async account(aid: string): Promise<{ balance: bigint; held: bigint; seq: number; head: string | undefined }> {
    let a = this.accounts.get(aid);
    if (!a) {
      const rec = (await this.store.accounts.get(aid)) as AccountRecord | undefined;
      a = { balance: BigInt(rec?.balance ?? '0'), held: BigInt(rec?.held ?? '0'), seq: rec?.seq ?? 0, head: rec?.head };
      this.accounts.set(aid, a);
    }
    return a;
  }

  /** A history entry for `aid`, with the balance its account has now (make the balance change first). */
  async entry(aid: string, kind: HistoryKind, amount: string, counterparty: string | null, hold: string | null): Promise<void> {
    const a = await this.account(aid);
    // An account only older versions wrote to has no head yet: its chain starts by hashing its newest entry.
    const prev = a.seq === 0 ? null : (a.head ?? hex(sha256(await storedEntry(this.store, aid, a.seq))));
    a.seq += 1;
    const e: StoredEntry = { seq: a.seq, tx: this.tx, at: this.at, kind, amount, counterparty, hold, balance: a.balance.toString(), prev };
    const bytes = pack(e);
    a.head = hex(sha256(bytes));
    this.writes.push({ type: 'put', sublevel: this.store.history, key: historyKey(aid, a.seq), value: bytes, valueEncoding: 'buffer' });
  }

  put(sublevel: unknown, key: string, value: unknown): void {
    this.writes.push({ type: 'put', sublevel, key, value });
  }

  del(sublevel: unknown, key: string): void {
    this.writes.push({ type: 'del', sublevel, key });
  }

  /** Writes everything in one synced batch, with the op's idempotency record when it had one. */
  async commit(op?: { key: string; digest: string; answer: unknown }): Promise<void> {
    for (const [aid, a] of this.accounts) {
      if (a.balance < 0n || a.held < 0n) throw new Error(`ledger bug: account ${aid} would go negative`);
      const rec: AccountRecord = { balance: a.balance.toString(), held: a.held.toString(), seq: a.seq };
      if (a.head !== undefined) rec.head = a.head;
      this.put(this.store.accounts, aid, rec);
    }
    if (op) this.put(this.store.ops, op.key, { digest: op.digest, answer: op.answer } satisfies OpRecord);
    // An acknowledged payment must survive power loss, as the node's journal does.
    await this.store.db.batch(this.writes as never, { sync: true });
  }
}

export class Ledger {
  private readonly serial = new KeyedSerial();
  private checked: Promise<void> | null = null;

  constructor(
    private readonly store: HubStore,
    private readonly hubAid: string,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * The start check (`checkLedger` fast), once: every op waits for it, and a damaged ledger refuses them
   * all with LedgerDamagedError. The hub calls it at start so it refuses to start.
   */
  check(): Promise<void> {
    this.checked ??= this.serial.run('ledger', async () => void (await checkLedger(this.store, 'fast')));
    return this.checked;
  }

  /** Credits `amount` to a registered AID (the hub's operator only; the server checks the signer). */
  async mint(aid: string, amount: string, nonce: string): Promise<MintAnswer> {
    checkNonce(nonce);
    if (typeof aid !== 'string' || aid.length === 0) throw new LedgerRefused(400, 'BAD_REQUEST', 'aid must be the AID to credit');
    if (!isAmount(amount))
      throw new LedgerRefused(400, 'BAD_REQUEST', 'amount must be a canonical decimal string from 1 to 9223372036854775807');
    const digest = digestOf('mint', aid, amount);
    return this.op(`mint:${nonce}`, digest, async (c) => {
      if (!(await this.store.agent(aid)))
        throw new LedgerRefused(
          404,
          'UNKNOWN_AID',
          `no agent ${aid} on this hub: the node registers when it publishes (\`anet hub-register --name NAME\`)`,
        );
      const minted = await this.minted();
      // Every balance is part of what was minted, so capping the total keeps every balance an amount.
      if (minted + BigInt(amount) > MAX_AMOUNT)
        throw new LedgerRefused(409, 'SUPPLY_LIMIT', `the hub has minted ${minted} credits; ${amount} more would pass 2^63-1`);
      const account = await c.account(aid);
      account.balance += BigInt(amount);
      await c.entry(aid, 'mint', amount, null, null);
      c.put(this.store.meta, MINTED, (minted + BigInt(amount)).toString());
      return { tx: c.tx, aid, amount, balance: account.balance.toString() };
    });
  }

  /** Holds the amount of a payer's authorization, asked for by its payee (`signer`). */
  async hold(signer: string, bytes: Uint8Array): Promise<HoldAnswer> {
    const peek = peekAuthorization(bytes);
    if (!peek.ok) throw new LedgerRefused(400, 'BAD_AUTHORIZATION', peek.why);
    // Only the payee may hold, and learns a retried hold's answer. The payer's signature is checked after
    // the nonce record, so a retry of an accepted hold answers the same after the payer rotated its key.
    if (peek.auth.to !== signer)
      throw new LedgerRefused(403, 'NOT_PAYEE', 'only the payee named in the authorization can ask for its hold');
    return this.op(`hold:${peek.auth.nonce}`, hex(sha256(bytes)), async (c) => {
      const payer = await this.store.agent(peek.auth.from);
      if (!payer) throw new LedgerRefused(404, 'UNKNOWN_AID', `the payer ${peek.auth.from} is not registered on this hub`);
      const read = readAuthorization(bytes, validateKel(payer.kel));
      if (!read.ok) throw new LedgerRefused(400, 'BAD_AUTHORIZATION', read.why);
      const auth = read.auth;
      // Only a tombstone can be here: a hold made from this nonce has a nonce record, answered before.
      if (await this.store.holds.get(auth.nonce))
        throw new LedgerRefused(409, 'HOLD_CLOSED', 'this authorization was already released unseen; ask the payer for a new one');
      if (auth.network !== `hub:${this.hubAid}` || auth.asset !== 'credit')
        throw new LedgerRefused(400, 'WRONG_NETWORK', `this hub holds asset "credit" on network hub:${this.hubAid}`);
      if (auth.validBefore <= c.at)
        throw new LedgerRefused(410, 'AUTHORIZATION_EXPIRED', 'the authorization is past its validBefore; ask the payer for a new one');
      const account = await c.account(auth.from);
      const amount = BigInt(auth.amount);
      if (account.balance < amount)
        throw new LedgerRefused(402, 'INSUFFICIENT_FUNDS', `the payer has ${account.balance} credits, ${auth.amount} asked`);
      account.balance -= amount;
      account.held += amount;
      await c.entry(auth.from, 'hold', auth.amount, auth.to, auth.nonce);
      const expires = c.at + HOLD_TTL_MS;
      c.put(this.store.holds, auth.nonce, {
        from: auth.from,
        to: auth.to,
        amount: auth.amount,
        state: 'held',
        at: c.at,
        expires,
        tx: c.tx,
      } satisfies HoldRecord);
      c.put(this.store.expiries, expiryKey(expires, auth.nonce), '');
      return { tx: c.tx, hold: auth.nonce, from: auth.from, to: auth.to, amount: auth.amount, state: 'held' as const, at: c.at };
    });
  }

  /** Captures a hold to its payee or releases it to the payer; asked for by the payee (`signer`). */
  async settle(signer: string, hold: string, action: 'capture' | 'release', nonce: string): Promise<SettleAnswer> {
    checkNonce(nonce);
    if (typeof hold !== 'string' || !NONCE.test(hold))
      throw new LedgerRefused(400, 'BAD_REQUEST', 'hold must be the authorization nonce (32 lowercase hex)');
    if (action !== 'capture' && action !== 'release') throw new LedgerRefused(400, 'BAD_REQUEST', 'action must be "capture" or "release"');
    const payee = async () => {
      const rec = (await this.store.holds.get(hold)) as HoldRecord | undefined;
      if (rec && rec.to !== signer) throw new LedgerRefused(403, 'NOT_PAYEE', 'only the payee of a hold can settle it');
    };
    // The payee check comes before the record, so nobody else learns a settlement's answer. A hold is
    // settled once: its settlement's record is keyed by the hold, not by a nonce anyone could pick (a
    // payer that used the provider's settle nonce first must not be able to block the capture).
    return this.op(
      `settle:${hold}`,
      digestOf('settle', hold, action, nonce),
      async (c) => {
        const rec = (await this.store.holds.get(hold)) as HoldRecord | undefined;
        if (!rec) {
          if (action === 'capture') throw new LedgerRefused(404, 'UNKNOWN_HOLD', `the hub holds nothing under ${hold}`);
          // A release can overtake its hold (the provider restarted while the hold was in flight): the
          // tombstone makes that hold refused when it arrives, so the payer is never charged for it.
          c.put(this.store.holds, hold, {
            from: null,
            to: signer,
            amount: '0',
            state: 'void',
            at: c.at,
            expires: null,
            tx: c.tx,
          } satisfies HoldRecord);
          return { tx: c.tx, hold, action, amount: '0', state: 'void' as const, at: c.at };
        }
        if (rec.state === 'expired')
          throw new LedgerRefused(409, 'HOLD_EXPIRED', 'the hold was older than 24 h and went back to the payer');
        if (rec.state !== 'held') throw new LedgerRefused(409, 'HOLD_SETTLED', `the hold was already settled (${rec.state})`);
        const state = action === 'capture' ? ('captured' as const) : ('released' as const);
        await this.endHold(c, hold, rec, state);
        return { tx: c.tx, hold, action, amount: rec.amount, state, at: c.at };
      },
      payee,
    );
  }

  /** An AID's balance, open holds and recent history (a registered AID; none of it yet is all zeros). */
  account(aid: string): Promise<Account> {
    return this.check().then(() =>
      this.serial.run('ledger', async () => {
        await this.expireDue();
        if (!(await this.store.agent(aid)))
          throw new LedgerRefused(404, 'UNKNOWN_AID', `no agent ${aid} on this hub: register first (\`anet hub-register --name NAME\`)`);
        const rec = (await this.store.accounts.get(aid)) as AccountRecord | undefined;
        const history: HistoryEntry[] = [];
        for await (const e of this.store.history.values({ gt: `${aid}!`, lt: `${aid}!~`, reverse: true, limit: HISTORY_LIMIT })) {
          const { prev: _, ...entry } = e as StoredEntry;
          history.push(entry);
        }
        return { aid, balance: rec?.balance ?? '0', held: rec?.held ?? '0', history: history.reverse() };
      }),
    );
  }

  /** Releases to their payers the holds older than 24 h (at hub start, every minute, and before each op). */
  sweep(): Promise<number> {
    return this.check().then(() => this.serial.run('ledger', () => this.expireDue()));
  }

  /** What was minted, the sum of all balances and of all open holds: the first is always the other two's sum. */
  totals(): Promise<Totals> {
    return this.serial.run('ledger', async () => {
      let balances = 0n;
      let held = 0n;
      for await (const a of this.store.accounts.values()) balances += BigInt((a as AccountRecord).balance);
      for await (const h of this.store.holds.values()) if ((h as HoldRecord).state === 'held') held += BigInt((h as HoldRecord).amount);
      return { minted: await this.minted(), balances, held };
    });
  }

  /** Resolves once every op queued so far has finished (before the store closes). */
  idle(): Promise<void> {
    return this.serial.run('ledger', async () => {});
  }

  /**
   * Runs one op in turn: due holds expire first, then `guard` may refuse; a nonce seen before answers as
   * it did (same body) or is refused (another body); otherwise `fn` decides, and its writes and answer are
   * committed together.
   */
  private async op<T>(key: string, digest: string, fn: (c: Change) => Promise<T>, guard?: () => Promise<void>): Promise<T> {
    await this.check();
    return this.serial.run('ledger', async () => {
      await this.expireDue();
      await guard?.();
      const seen = (await this.store.ops.get(key)) as OpRecord | undefined;
      if (seen) {
        if (seen.digest === digest) return seen.answer as T;
        if (key.startsWith('settle:'))
          throw new LedgerRefused(409, 'HOLD_SETTLED', `the hold was already settled (${(seen.answer as SettleAnswer).state})`);
        throw new LedgerRefused(409, 'NONCE_REUSED', 'this nonce was used for another ledger operation');
      }
      const c = new Change(this.store, this.now());
      const answer = await fn(c);
      await c.commit({ key, digest, answer });
      return answer;
    });
  }

  /** Inside the serial: each hold at or past its expiry goes back to its payer, one batch each. */
  private async expireDue(): Promise<number> {
    const due: string[] = [];
    for await (const key of this.store.expiries.keys({ lt: timeKey(this.now() + 1) })) due.push(key.slice(key.indexOf('!') + 1));
    for (const hold of due) {
      const c = new Change(this.store, this.now());
      await this.endHold(c, hold, (await this.store.holds.get(hold)) as HoldRecord, 'expired');
      await c.commit();
    }
    return due.length;
  }

  /** Ends an open hold: its amount leaves the payer's held sum, to the payee (captured) or back to the payer. */
  private async endHold(c: Change, hold: string, rec: HoldRecord, state: 'captured' | 'released' | 'expired'): Promise<void> {
    const from = rec.from!;
    const amount = BigInt(rec.amount);
    const payer = await c.account(from);
    payer.held -= amount;
    if (state === 'captured') {
      await c.entry(from, 'capture', rec.amount, rec.to, hold);
      (await c.account(rec.to)).balance += amount;
      await c.entry(rec.to, 'credit', rec.amount, from, hold);
    } else {
      payer.balance += amount;
      await c.entry(from, state === 'released' ? 'release' : 'expire', rec.amount, rec.to, hold);
    }
    c.put(this.store.holds, hold, { ...rec, state } satisfies HoldRecord);
    c.del(this.store.expiries, expiryKey(rec.expires!, hold));
  }

  private async minted(): Promise<bigint> {
    return BigInt(((await this.store.meta.get(MINTED)) as string | undefined) ?? '0');
  }
}

/** The stored bytes of an account's history entry (a missing one is damage: the account counts it). */
async function storedEntry(store: HubStore, aid: string, seq: number): Promise<Buffer> {
  const bytes = (await store.history.get(historyKey(aid, seq), { valueEncoding: 'buffer' })) as Buffer | undefined;
  if (bytes === undefined) throw damaged(store, aid, seq, `entry ${seq} is missing though the account counts it`);
  return bytes;
}

const damaged = (store: HubStore, aid: string, seq: number, problem: string) =>
  new LedgerDamagedError(dirname(store.db.location), aid, seq, problem);

/**
 * Checks the ledger's history; throws LedgerDamagedError at the first damage. `fast` (every hub start):
 * each account's newest entry is there, nothing is past it, and its hash is the account's head — a few
 * point reads per account. `full` (`anet replay --verify` on a hub's data dir): every entry of every
 * account, in key order: seqs from 1 without a gap, each `prev` the hash of the entry before, the last
 * the account's seq and head, and no history without an account. Returns the entries checked.
 */
export async function checkLedger(store: HubStore, depth: 'fast' | 'full'): Promise<{ accounts: number; entries: number }> {
  const accounts = new Map<string, AccountRecord>();
  for await (const [aid, rec] of store.accounts.iterator()) accounts.set(aid, rec as AccountRecord);
  if (depth === 'fast') {
    const aids = [...accounts.keys()].filter((aid) => accounts.get(aid)!.seq > 0);
    for (let i = 0; i < aids.length; i += 512) {
      const page = aids.slice(i, i + 512);
      const keys = page.flatMap((aid) => [historyKey(aid, accounts.get(aid)!.seq), historyKey(aid, accounts.get(aid)!.seq + 1)]);
      const values = (await store.history.getMany(keys, { valueEncoding: 'buffer' })) as (Buffer | undefined)[];
      page.forEach((aid, j) => {
        const rec = accounts.get(aid)!;
        const newest = values[2 * j];
        if (newest === undefined) throw damaged(store, aid, rec.seq, `its newest entry, ${rec.seq}, is missing`);
        if (values[2 * j + 1] !== undefined)
          throw damaged(store, aid, rec.seq + 1, `an entry past the account's newest (${rec.seq}) is there`);
        if (rec.head !== undefined && hex(sha256(newest)) !== rec.head)
          throw damaged(store, aid, rec.seq, `entry ${rec.seq} does not match its hash`);
      });
    }
    return { accounts: accounts.size, entries: aids.length };
  }
  let aid: string | null = null;
  let expected = 1;
  let prevHash: string | null = null;
  let chained = false;
  let entries = 0;
  const seen = new Set<string>();
  const close = () => {
    if (aid === null) return;
    const rec = accounts.get(aid);
    if (!rec) throw damaged(store, aid, 1, 'its account record is missing');
    if (rec.seq !== expected - 1)
      throw damaged(
        store,
        aid,
        Math.min(rec.seq, expected - 1) + 1,
        rec.seq > expected - 1 ? `entries ${expected}–${rec.seq} are missing` : `entries past the account's newest (${rec.seq}) are there`,
      );
    if (rec.head !== undefined && rec.head !== prevHash)
      throw damaged(store, aid, rec.seq, `entry ${rec.seq} does not match the account's hash`);
  };
  for await (const [key, bytes] of store.history.iterator({ valueEncoding: 'buffer' })) {
    const bang = key.lastIndexOf('!');
    const owner = key.slice(0, bang);
    const seq = Number(key.slice(bang + 1));
    if (owner !== aid) {
      close();
      aid = owner;
      seen.add(aid);
      expected = 1;
      prevHash = null;
      chained = false;
    }
    if (seq !== expected)
      throw damaged(store, aid, expected, seq > expected ? `entry ${expected} is missing` : `entry ${seq} is out of order`);
    let entry: StoredEntry;
    try {
      entry = unpack(bytes as Buffer) as StoredEntry;
    } catch {
      throw damaged(store, aid, seq, `entry ${seq} does not decode`);
    }
    if (entry.seq !== seq) throw damaged(store, aid, seq, `entry ${seq} holds seq ${entry.seq}`);
    if ('prev' in entry) {
      chained = true;
      if (entry.prev !== (seq === 1 ? null : prevHash))
        throw damaged(store, aid, seq - 1, `entry ${seq - 1} does not match the hash entry ${seq} holds`);
    } else if (chained) throw damaged(store, aid, seq, `entry ${seq} has no link to the entry before it`);
    prevHash = hex(sha256(bytes as Buffer));
    expected++;
    entries++;
  }
  close();
  for (const [owner, rec] of accounts)
    if (rec.seq > 0 && !seen.has(owner)) throw damaged(store, owner, 1, `all ${rec.seq} entries are missing`);
  return { accounts: accounts.size, entries };
}

function checkNonce(nonce: unknown): void {
  if (typeof nonce !== 'string' || !NONCE.test(nonce))
    throw new LedgerRefused(400, 'BAD_REQUEST', 'nonce must be 16 random bytes in lowercase hex');
}
