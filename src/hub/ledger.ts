// The hub's ledger of credits (SPEC §10, §11): balances per AID; holds made from a payer's signed
// authorization, captured to the payee or released back; the operator's mint. Every op is idempotent:
// the hub keeps, per key (`mint:<nonce>`, `hold:<authorization nonce>`, `settle:<hold>`), the digest of
// the op's body and the answer it gave, so a retry gets the same answer and a different body under a
// used key is refused (`NONCE_REUSED`; for a hold already settled, under another nonce or the other way,
// `HOLD_SETTLED`). A settlement is keyed by its hold, so no party can block it by spending its nonce first. Only ops that changed the
// ledger are recorded; a refusal changes nothing and is decided again on retry.
//
// Amounts are canonical decimal strings wherever they are stored or sent and BigInt only while computing,
// so msgpackr never meets a bigint and JSON never a float. Each op is one transaction of the hub's storage
// (src/hub/storage/types.ts LedgerStore: accounts, hold, history, op record, all or nothing, serialisable
// against every other op on any replica; the LevelDB backend runs them one at a time, PostgreSQL under
// READ COMMITTED with every row read locked and rows read as absent inserted, run again when it loses a
// race on a key or a deadlock). What needs no ledger state — decoding the payer's KEL, checking
// its signature — is done before the transaction, so transactions stay short. A hold past its 24 h is
// released to its payer by the periodic sweep, and by any op that reads the payer's account first, so a
// balance is never read without the holds that should have come back to it.
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
import { createHash } from 'node:crypto';
import { pack, unpack } from '../../store/codec.js';
import { validateKel } from '../identity/kel.js';
import { MAX_AMOUNT, isAmount, peekAuthorization, readAuthorization } from '../protocol/authorization.js';
import type { MintAnswer, HoldAnswer, SettleAnswer, HistoryKind, HistoryEntry, Account } from '../protocol/hub-api.js';
import type {
  AccountRecord,
  AgentStore,
  HoldRecord,
  HubStorage,
  LedgerPlan,
  LedgerReads,
  LedgerStore,
  LedgerWrites,
  RequestNonce,
} from './storage/types.js';

/** A hold not settled within this is released to the payer. */
export const HOLD_TTL_MS = 24 * 3_600_000;
/** Due holds released per page of a sweep. */
const SWEEP_PAGE = 1000;
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

const newTx = () => `tx_${randomHex(16)}`;
const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');
/** SHA-256 natively (the same bytes): the pure-JS one showed in the hub's profile at 32 ledger ops at once. */
const sha256 = (bytes: Uint8Array): Uint8Array => createHash('sha256').update(bytes).digest();
/** Mint and settle bodies are digested as tagged lines; a hold's digest is that of its authorization bytes. */
const digestOf = (...fields: string[]) => hex(sha256(new TextEncoder().encode(`anet-ledger/v1\n${fields.join('\n')}`)));

interface Loaded {
  balance: bigint;
  held: bigint;
  seq: number;
  head: string | undefined;
}

/** A refusal decided after writes that must stay (a hold found past its expiry is expired, then refused). */
interface Deferred {
  refusal: LedgerRefused;
}

/**
 * One op's reads and writes inside its transaction: accounts are read once and written once, however many
 * entries touch them. Reading a payer's account first releases its holds that are past their expiry.
 */
class Change {
  readonly tx = newTx();
  private readonly loaded = new Map<string, Loaded>();
  private readonly holds = new Map<string, HoldRecord>();
  private readonly entries: LedgerWrites['entries'] = [];
  private mintedNow: string | null = null;

  constructor(
    readonly reads: LedgerReads,
    readonly at: number,
    private readonly where: string,
  ) {}

  /** Declares what this op will read, at its time (a backend may fetch it all in one round trip). */
  async prefetch(plan: Omit<LedgerPlan, 'at'>): Promise<void> {
    if (!(await this.reads.prefetch({ ...plan, at: this.at })))
      throw new LedgerRefused(401, 'REPLAYED', 'this request was already received');
  }

  async account(aid: string): Promise<Loaded> {
    let a = this.loaded.get(aid);
    if (a) return a;
    const rec = await this.reads.account(aid);
    a = { balance: BigInt(rec?.balance ?? '0'), held: BigInt(rec?.held ?? '0'), seq: rec?.seq ?? 0, head: rec?.head };
    this.loaded.set(aid, a);
    for (const nonce of await this.reads.dueOf(aid, this.at)) {
      const hold = await this.hold(nonce);
      if (hold?.state === 'held') await this.endHold(nonce, hold, 'expired');
    }
    return a;
  }

  /** A hold as this op sees it (its own writes first). */
  async hold(nonce: string): Promise<HoldRecord | undefined> {
    return this.holds.get(nonce) ?? (await this.reads.hold(nonce));
  }

  putHold(nonce: string, rec: HoldRecord): void {
    this.holds.set(nonce, rec);
  }

  minted(value: bigint): void {
    this.mintedNow = value.toString();
  }

  /** A history entry for `aid`, with the balance its account has now (make the balance change first). */
  async entry(aid: string, kind: HistoryKind, amount: string, counterparty: string | null, hold: string | null): Promise<void> {
    const a = await this.account(aid);
    // An account only older versions wrote to has no head yet: its chain starts by hashing its newest entry.
    const prev = a.seq === 0 ? null : (a.head ?? hex(sha256(await this.storedEntry(aid, a.seq))));
    a.seq += 1;
    const e: StoredEntry = { seq: a.seq, tx: this.tx, at: this.at, kind, amount, counterparty, hold, balance: a.balance.toString(), prev };
    const bytes = pack(e);
    a.head = hex(sha256(bytes));
    this.entries.push({ aid, seq: a.seq, bytes });
  }

  private async storedEntry(aid: string, seq: number): Promise<Uint8Array> {
    const bytes = await this.reads.entry(aid, seq);
    if (bytes === undefined) throw new LedgerDamagedError(this.where, aid, seq, `entry ${seq} is missing though the account counts it`);
    return bytes;
  }

  /** Ends an open hold: its amount leaves the payer's held sum, to the payee (captured) or back to the payer. */
  async endHold(hold: string, rec: HoldRecord, state: 'captured' | 'released' | 'expired'): Promise<void> {
    const from = rec.from!;
    const amount = BigInt(rec.amount);
    // Marked first: loading the payer expires its due holds, this one included unless it is ended here.
    this.holds.set(hold, { ...rec, state });
    const payer = await this.account(from);
    payer.held -= amount;
    if (state === 'captured') {
      await this.entry(from, 'capture', rec.amount, rec.to, hold);
      (await this.account(rec.to)).balance += amount;
      await this.entry(rec.to, 'credit', rec.amount, from, hold);
    } else {
      payer.balance += amount;
      await this.entry(from, state === 'released' ? 'release' : 'expire', rec.amount, rec.to, hold);
    }
  }

  /** A refusal that keeps the writes made so far (see Ledger.op). */
  defer(refusal: LedgerRefused): Deferred {
    return { refusal };
  }

  /** Whether this op changed anything. */
  get changed(): boolean {
    return this.entries.length > 0 || this.holds.size > 0 || this.mintedNow !== null;
  }

  /** Everything to commit, with the op's idempotency record when it has one. */
  writes(op: LedgerWrites['op']): LedgerWrites {
    const accounts = new Map<string, AccountRecord>();
    for (const [aid, a] of this.loaded) {
      if (a.balance < 0n || a.held < 0n) throw new Error(`ledger bug: account ${aid} would go negative`);
      if (!this.entries.some((e) => e.aid === aid)) continue;
      const rec: AccountRecord = { balance: a.balance.toString(), held: a.held.toString(), seq: a.seq };
      if (a.head !== undefined) rec.head = a.head;
      accounts.set(aid, rec);
    }
    return { accounts, entries: this.entries, holds: this.holds, op, minted: this.mintedNow };
  }
}

export class Ledger {
  private checked: Promise<void> | null = null;
  /** Ops under way (close waits for them). */
  private readonly running = new Set<Promise<unknown>>();
  private readonly ledger: LedgerStore;
  private readonly agents: Pick<AgentStore, 'get'>;
  private readonly where: string;

  constructor(
    storage: Pick<HubStorage, 'ledger' | 'agents' | 'where'>,
    private readonly hubAid: string,
    private readonly now: () => number = Date.now,
  ) {
    this.ledger = storage.ledger;
    this.agents = storage.agents;
    this.where = storage.where;
  }

  /**
   * The start check (`checkLedger` fast), once: every op waits for it, and a damaged ledger refuses them
   * all with LedgerDamagedError. The hub calls it at start so it refuses to start.
   */
  check(): Promise<void> {
    this.checked ??= checkLedger(this.ledger, this.where, 'fast').then(() => {});
    return this.checked;
  }

  /** Credits `amount` to a registered AID (the hub's operator only; the server checks the signer). */
  async mint(aid: string, amount: string, nonce: string): Promise<MintAnswer> {
    checkNonce(nonce);
    if (typeof aid !== 'string' || aid.length === 0) throw new LedgerRefused(400, 'BAD_REQUEST', 'aid must be the AID to credit');
    if (!isAmount(amount))
      throw new LedgerRefused(400, 'BAD_REQUEST', 'amount must be a canonical decimal string from 1 to 9223372036854775807');
    const registered = (await this.agents.get(aid)) !== undefined;
    return this.op(`mint:${nonce}`, digestOf('mint', aid, amount), {}, async (c) => {
      if (!registered)
        throw new LedgerRefused(
          404,
          'UNKNOWN_AID',
          `no agent ${aid} on this hub: the node registers when it publishes (\`anet hub-register --name NAME\`)`,
        );
      const minted = BigInt(await c.reads.minted());
      // Every balance is part of what was minted, so capping the total keeps every balance an amount.
      if (minted + BigInt(amount) > MAX_AMOUNT)
        throw new LedgerRefused(409, 'SUPPLY_LIMIT', `the hub has minted ${minted} credits; ${amount} more would pass 2^63-1`);
      const account = await c.account(aid);
      account.balance += BigInt(amount);
      await c.entry(aid, 'mint', amount, null, null);
      c.minted(minted + BigInt(amount));
      return { tx: c.tx, aid, amount, balance: account.balance.toString() };
    });
  }

  /**
   * Holds the amount of a payer's authorization, asked for by its payee (`signer`). `claim`: the request's
   * nonce, claimed in the op's transaction (one round trip less); the caller claims it if the op did not.
   */
  async hold(signer: string, bytes: Uint8Array, claim?: RequestNonce): Promise<HoldAnswer> {
    const peek = peekAuthorization(bytes);
    if (!peek.ok) throw new LedgerRefused(400, 'BAD_AUTHORIZATION', peek.why);
    // Only the payee may hold, and learns a retried hold's answer.
    if (peek.auth.to !== signer)
      throw new LedgerRefused(403, 'NOT_PAYEE', 'only the payee named in the authorization can ask for its hold');
    // The payer's KEL and signature are checked before the transaction (they need no ledger state), but a
    // failure is answered only after the op record: a retry of an accepted hold answers the same after
    // the payer rotated its key.
    const payer = await this.agents.get(peek.auth.from);
    const read = payer ? readAuthorization(bytes, validateKel(payer.kel)) : null;
    // Its nonce's hold (a tombstone would refuse it) and its payer's account, with the payer's due holds.
    const plan = { holds: [peek.auth.nonce], accounts: read?.ok ? [read.auth.from] : [], claim };
    return this.op(`hold:${peek.auth.nonce}`, hex(sha256(bytes)), plan, async (c) => {
      if (!read) throw new LedgerRefused(404, 'UNKNOWN_AID', `the payer ${peek.auth.from} is not registered on this hub`);
      if (!read.ok) throw new LedgerRefused(400, 'BAD_AUTHORIZATION', read.why);
      const auth = read.auth;
      // Only a tombstone can be here: a hold made from this nonce has an op record, answered before.
      if (await c.hold(auth.nonce))
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
      c.putHold(auth.nonce, {
        from: auth.from,
        to: auth.to,
        amount: auth.amount,
        state: 'held',
        at: c.at,
        expires: c.at + HOLD_TTL_MS,
        tx: c.tx,
      });
      return { tx: c.tx, hold: auth.nonce, from: auth.from, to: auth.to, amount: auth.amount, state: 'held' as const, at: c.at };
    });
  }

  /** Captures a hold to its payee or releases it to the payer; asked for by the payee (`signer`). `claim`: as hold's. */
  async settle(signer: string, hold: string, action: 'capture' | 'release', nonce: string, claim?: RequestNonce): Promise<SettleAnswer> {
    checkNonce(nonce);
    if (typeof hold !== 'string' || !NONCE.test(hold))
      throw new LedgerRefused(400, 'BAD_REQUEST', 'hold must be the authorization nonce (32 lowercase hex)');
    if (action !== 'capture' && action !== 'release') throw new LedgerRefused(400, 'BAD_REQUEST', 'action must be "capture" or "release"');
    // The payee check comes before the record, so nobody else learns a settlement's answer. A hold is
    // settled once: its settlement's record is keyed by the hold, not by a nonce anyone could pick (a
    // payer that used the provider's settle nonce first must not be able to block the capture).
    const payee = async (c: Change) => {
      const rec = await c.hold(hold);
      if (rec && rec.to !== signer) throw new LedgerRefused(403, 'NOT_PAYEE', 'only the payee of a hold can settle it');
    };
    // The hold, its payer's account (and its payee's for a capture), with their due holds.
    const plan = { holds: [hold], parties: action === 'capture' ? ('both' as const) : ('payer' as const), claim };
    return this.op(
      `settle:${hold}`,
      digestOf('settle', hold, action, nonce),
      plan,
      async (c) => {
        let rec = await c.hold(hold);
        if (!rec) {
          if (action === 'capture') throw new LedgerRefused(404, 'UNKNOWN_HOLD', `the hub holds nothing under ${hold}`);
          // A release can overtake its hold (the provider restarted while the hold was in flight): the
          // tombstone makes that hold refused when it arrives, so the payer is never charged for it.
          c.putHold(hold, { from: null, to: signer, amount: '0', state: 'void', at: c.at, expires: null, tx: c.tx });
          return { tx: c.tx, hold, action, amount: '0', state: 'void' as const, at: c.at };
        }
        // Reading the payer expires the hold if it is past its 24 h (and keeps that, though this op is refused).
        if (rec.from !== null) await c.account(rec.from);
        rec = (await c.hold(hold))!;
        if (rec.state === 'expired')
          return c.defer(new LedgerRefused(409, 'HOLD_EXPIRED', 'the hold was older than 24 h and went back to the payer'));
        if (rec.state !== 'held') throw new LedgerRefused(409, 'HOLD_SETTLED', `the hold was already settled (${rec.state})`);
        const state = action === 'capture' ? ('captured' as const) : ('released' as const);
        await c.endHold(hold, rec, state);
        return { tx: c.tx, hold, action, amount: rec.amount, state, at: c.at };
      },
      payee,
    );
  }

  /** An AID's balance, open holds and recent history (a registered AID; none of it yet is all zeros). */
  async account(aid: string): Promise<Account> {
    await this.check();
    if (!(await this.agents.get(aid)))
      throw new LedgerRefused(404, 'UNKNOWN_AID', `no agent ${aid} on this hub: register first (\`anet hub-register --name NAME\`)`);
    // Its holds past their expiry go back first, so the balance shown is the one the next op will see.
    const { balance, held } = await this.track(
      this.ledger.transact(async (reads) => {
        const c = new Change(reads, this.now(), this.where);
        await c.prefetch({ accounts: [aid] });
        const a = await c.account(aid);
        return { answer: { balance: a.balance.toString(), held: a.held.toString() }, writes: c.changed ? c.writes(null) : null };
      }),
    );
    const history: HistoryEntry[] = [];
    for (const bytes of await this.ledger.recent(aid, HISTORY_LIMIT)) {
      const { prev: _, ...entry } = unpack(bytes) as StoredEntry;
      history.push(entry);
    }
    return { aid, balance, held, history };
  }

  /** Releases to their payers the holds older than 24 h (at hub start and every minute); how many. */
  async sweep(): Promise<number> {
    await this.check();
    let released = 0;
    // In pages until none is due: a backlog left would make every op's read of its payer's due holds slow.
    for (;;) {
      const due = await this.ledger.due(this.now(), SWEEP_PAGE);
      const n = await this.release(due);
      released += n;
      // A full page of which none could be released would come back the same: stop rather than spin.
      if (due.length < SWEEP_PAGE || n === 0) return released;
    }
  }

  /** Releases each of `holds` that is still open and due; how many. */
  private async release(holds: string[]): Promise<number> {
    let released = 0;
    for (const hold of holds) {
      const done = await this.track(
        this.ledger.transact(async (reads) => {
          const c = new Change(reads, this.now(), this.where);
          await c.prefetch({ holds: [hold], parties: 'payer' });
          const rec = await c.hold(hold);
          if (rec?.state !== 'held' || rec.expires === null || rec.expires > c.at) return { answer: false, writes: null };
          await c.endHold(hold, rec, 'expired');
          return { answer: true, writes: c.writes(null) };
        }),
      );
      if (done) released++;
    }
    return released;
  }

  /** What was minted, the sum of all balances and of all open holds: the first is always the other two's sum. */
  async totals(): Promise<Totals> {
    let balances = 0n;
    for await (const [, a] of this.ledger.accounts()) balances += BigInt(a.balance);
    return { minted: BigInt(await this.ledger.minted()), balances, held: await this.ledger.heldTotal() };
  }

  /** Resolves once every op under way has finished (before the store closes). */
  async idle(): Promise<void> {
    while (this.running.size) await Promise.allSettled([...this.running]);
  }

  private track<T>(p: Promise<T>): Promise<T> {
    this.running.add(p);
    const done = () => this.running.delete(p);
    p.then(done, done);
    return p;
  }

  /**
   * Runs one op as a transaction, its record and what `plan` names read first: `guard` may refuse; a key seen before answers as it did (same body) or
   * is refused (another body); otherwise `fn` decides, and its writes and answer are committed together.
   * A refusal `fn` defers (c.defer) commits the writes made before it, without an op record, then throws.
   */
  private async op<T>(
    key: string,
    digest: string,
    plan: Omit<LedgerPlan, 'at' | 'op'>,
    fn: (c: Change) => Promise<T | Deferred>,
    guard?: (c: Change) => Promise<void>,
  ): Promise<T> {
    await this.check();
    const result = await this.track(
      this.ledger.transact(async (reads) => {
        const c = new Change(reads, this.now(), this.where);
        await c.prefetch({ ...plan, op: key });
        await guard?.(c);
        const seen = await reads.op(key);
        if (seen) {
          if (seen.digest === digest) return { answer: seen.answer as T | Deferred, writes: null };
          if (key.startsWith('settle:'))
            throw new LedgerRefused(409, 'HOLD_SETTLED', `the hold was already settled (${(seen.answer as SettleAnswer).state})`);
          throw new LedgerRefused(409, 'NONCE_REUSED', 'this nonce was used for another ledger operation');
        }
        const answer = await fn(c);
        if (isDeferred(answer)) return { answer, writes: c.changed ? c.writes(null) : null };
        return { answer, writes: c.writes({ key, digest, answer }) };
      }),
    );
    if (isDeferred(result)) throw result.refusal;
    return result;
  }
}

const isDeferred = (v: unknown): v is Deferred => typeof v === 'object' && v !== null && (v as Deferred).refusal instanceof LedgerRefused;

const damaged = (where: string, aid: string, seq: number, problem: string) => new LedgerDamagedError(where, aid, seq, problem);

/**
 * Checks the ledger's history; throws LedgerDamagedError at the first damage. `fast` (every hub start):
 * each account's newest entry is there, nothing is past it, and its hash is the account's head — a few
 * point reads per account. `full` (`anet replay --verify` on a hub's data dir): every entry of every
 * account, in key order: seqs from 1 without a gap, each `prev` the hash of the entry before, the last
 * the account's seq and head, and no history without an account. Returns the entries checked.
 */
export async function checkLedger(
  ledger: LedgerStore,
  where: string,
  depth: 'fast' | 'full',
): Promise<{ accounts: number; entries: number }> {
  const accounts = new Map<string, AccountRecord>();
  for await (const [aid, rec] of ledger.accounts()) accounts.set(aid, rec);
  if (depth === 'fast') {
    const aids = [...accounts.keys()].filter((aid) => accounts.get(aid)!.seq > 0);
    for (let i = 0; i < aids.length; i += 512) {
      const page = aids.slice(i, i + 512);
      const keys = page.flatMap((aid) => [
        { aid, seq: accounts.get(aid)!.seq },
        { aid, seq: accounts.get(aid)!.seq + 1 },
      ]);
      const values = await ledger.entries(keys);
      page.forEach((aid, j) => {
        const rec = accounts.get(aid)!;
        const newest = values[2 * j];
        if (newest === undefined) throw damaged(where, aid, rec.seq, `its newest entry, ${rec.seq}, is missing`);
        if (values[2 * j + 1] !== undefined)
          throw damaged(where, aid, rec.seq + 1, `an entry past the account's newest (${rec.seq}) is there`);
        if (rec.head !== undefined && hex(sha256(newest)) !== rec.head)
          throw damaged(where, aid, rec.seq, `entry ${rec.seq} does not match its hash`);
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
    if (!rec) throw damaged(where, aid, 1, 'its account record is missing');
    if (rec.seq !== expected - 1)
      throw damaged(
        where,
        aid,
        Math.min(rec.seq, expected - 1) + 1,
        rec.seq > expected - 1 ? `entries ${expected}–${rec.seq} are missing` : `entries past the account's newest (${rec.seq}) are there`,
      );
    if (rec.head !== undefined && rec.head !== prevHash)
      throw damaged(where, aid, rec.seq, `entry ${rec.seq} does not match the account's hash`);
  };
  for await (const { aid: owner, seq, bytes } of ledger.history()) {
    if (owner !== aid) {
      close();
      aid = owner;
      seen.add(aid);
      expected = 1;
      prevHash = null;
      chained = false;
    }
    if (seq !== expected)
      throw damaged(where, aid, expected, seq > expected ? `entry ${expected} is missing` : `entry ${seq} is out of order`);
    let entry: StoredEntry;
    try {
      entry = unpack(bytes) as StoredEntry;
    } catch {
      throw damaged(where, aid, seq, `entry ${seq} does not decode`);
    }
    if (entry.seq !== seq) throw damaged(where, aid, seq, `entry ${seq} holds seq ${entry.seq}`);
    if ('prev' in entry) {
      chained = true;
      if (entry.prev !== (seq === 1 ? null : prevHash))
        throw damaged(where, aid, seq - 1, `entry ${seq - 1} does not match the hash entry ${seq} holds`);
    } else if (chained) throw damaged(where, aid, seq, `entry ${seq} has no link to the entry before it`);
    prevHash = hex(sha256(bytes));
    expected++;
    entries++;
  }
  close();
  for (const [owner, rec] of accounts)
    if (rec.seq > 0 && !seen.has(owner)) throw damaged(where, owner, 1, `all ${rec.seq} entries are missing`);
  return { accounts: accounts.size, entries };
}

function checkNonce(nonce: unknown): void {
  if (typeof nonce !== 'string' || !NONCE.test(nonce))
    throw new LedgerRefused(400, 'BAD_REQUEST', 'nonce must be 16 random bytes in lowercase hex');
}
