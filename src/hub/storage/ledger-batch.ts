// Several ledger ops in one database transaction (issue 19: the PostgreSQL ledger at 32 ops at once).
// Each op of a transaction costs the server and the hub a few statements, two round trips and a synced
// commit, whatever it writes; at 32 at once that, not the rows, was most of both sides' CPU. A batch pays
// it once for all its ops: their plans are read in one statement, the ops then run ONE AFTER ANOTHER, each
// reading what the ops before it in the batch wrote (an overlay over the transaction's locked reads), and
// all their writes go in one statement with one COMMIT.
//
// Correctness still rests on the database alone (row locks, unique keys, the whole batch run again when
// it loses a race, as one op's transaction is): ops that run one after another on the rows they locked are
// serialisable as they were one by one. An op that throws (a refusal) writes nothing, but its request
// nonce's claim is committed with the others. An error the database answers fails the batch; the store
// then runs each of its ops alone, so one op's trouble is never another's answer (a lost connection is
// every op's error: the COMMIT may have landed, see PgLedger.together).
import type { AccountRecord, HoldRecord, LedgerPlan, LedgerReads, LedgerWrites, OpRecord } from './types.js';

/** A transaction function, as LedgerStore.transact takes it. */
export type TransactFn<T = unknown> = (reads: LedgerReads) => Promise<{ answer: T; writes: LedgerWrites | null }>;

/** The writes of a batch: one op's, with every op record of the batch. */
export type BatchWrites = Omit<LedgerWrites, 'op'> & { ops: ({ key: string } & OpRecord)[] };

/** The locked reads of the batch's transaction, and its one statement for all the plans declared at start. */
export interface BatchReads extends LedgerReads {
  /** Reads every plan at once; per plan, whether its claim was taken (true when it has none). */
  prefetchAll(plans: LedgerPlan[]): Promise<boolean[]>;
}

export type Outcome = { ok: true; answer: unknown } | { ok: false; error: unknown };

export interface BatchResult {
  outcomes: Outcome[];
  /** What to commit: null when no op wrote anything. */
  writes: BatchWrites | null;
  /** A failure of the database while the ops ran: the transaction is aborted and must not commit. */
  failed?: { error: unknown };
}

/** The writes of the ops run so far, which later ops of the batch read first. */
class Overlay {
  readonly accounts = new Map<string, AccountRecord>();
  readonly holds = new Map<string, HoldRecord>();
  readonly entries: LedgerWrites['entries'] = [];
  readonly entryBytes = new Map<string, Uint8Array>();
  readonly ops = new Map<string, { key: string } & OpRecord>();
  minted: string | null = null;
  wrote = false;

  /**
   * Takes an op's writes, all or none: the op record's copy (the one step that can fail, on an answer JSON
   * cannot carry) is made before anything is taken, so a failed op leaves nothing here.
   */
  add(w: LedgerWrites): void {
    // As the database would give it back: a copy, not the object another op's caller holds.
    const op = w.op && { ...w.op, answer: w.op.answer === undefined ? undefined : JSON.parse(JSON.stringify(w.op.answer)) };
    this.wrote = true;
    for (const [aid, a] of w.accounts) this.accounts.set(aid, { ...a });
    for (const e of w.entries) {
      this.entries.push(e);
      this.entryBytes.set(entryKey(e.aid, e.seq), e.bytes);
    }
    for (const [nonce, h] of w.holds) this.holds.set(nonce, { ...h });
    if (op) this.ops.set(op.key, op);
    if (w.minted !== null) this.minted = w.minted;
  }

  /**
   * The due holds of `payer` as a transaction run after the earlier ops would read them: those the
   * transaction read (with their expiries) that are still open here, and those written here open and due;
   * by expiry, then nonce, as the database orders them.
   */
  dueOf(payer: string, now: number, stored: { nonce: string; expires: number }[]): string[] {
    const due = new Map<string, number>();
    for (const { nonce, expires } of stored) {
      const h = this.holds.get(nonce);
      if (h === undefined) due.set(nonce, expires);
      else if (h.state === 'held' && h.expires !== null && h.expires <= now) due.set(nonce, h.expires);
    }
    for (const [nonce, h] of this.holds)
      if (h.from === payer && h.state === 'held' && h.expires !== null && h.expires <= now) due.set(nonce, h.expires);
    return [...due].sort(([a, x], [b, y]) => x - y || (a < b ? -1 : a > b ? 1 : 0)).map(([nonce]) => nonce);
  }

  writes(): BatchWrites | null {
    if (!this.wrote) return null;
    return { accounts: this.accounts, holds: this.holds, entries: this.entries, ops: [...this.ops.values()], minted: this.minted };
  }
}

const entryKey = (aid: string, seq: number) => `${aid}\n${seq}`;

/** One op's reads: the overlay first, then the transaction; each waits for the op's turn. */
class OpView implements LedgerReads {
  plan: LedgerPlan | null = null;
  claimed = true;
  /** True while the op's function runs up to its first await: a prefetch then joins the batch's one statement. */
  starting = true;
  private opened!: () => void;
  private readonly turn = new Promise<void>((resolve) => {
    this.opened = resolve;
  });

  constructor(
    private readonly overlay: Overlay,
    private readonly base: BatchReads,
    private readonly batch: { failed?: { error: unknown } },
  ) {}

  open(): void {
    this.opened();
  }

  /** Waits for this op's turn; a transaction the database already failed reads nothing more. */
  private async ready(): Promise<void> {
    await this.turn;
    if (this.batch.failed) throw this.batch.failed.error;
  }

  /** A read of the transaction: one that fails has aborted it, for every op of the batch. */
  private read<T>(p: Promise<T>): Promise<T> {
    return p.catch((error: unknown) => {
      this.batch.failed ??= { error };
      throw error;
    });
  }

  async prefetch(plan: LedgerPlan): Promise<boolean> {
    if (this.starting && this.plan === null) {
      this.plan = plan;
      await this.ready();
      return this.claimed;
    }
    await this.ready();
    return this.read(this.base.prefetch(plan));
  }

  async account(aid: string): Promise<AccountRecord | undefined> {
    await this.ready();
    const written = this.overlay.accounts.get(aid);
    // A copy: an op that changes what it read and then fails must not change an earlier op's write.
    return written ? { ...written } : this.read(this.base.account(aid));
  }

  async entry(aid: string, seq: number): Promise<Uint8Array | undefined> {
    await this.ready();
    const written = this.overlay.entryBytes.get(entryKey(aid, seq));
    return written ? written.slice() : this.read(this.base.entry(aid, seq));
  }

  async hold(nonce: string): Promise<HoldRecord | undefined> {
    await this.ready();
    const written = this.overlay.holds.get(nonce);
    return written ? { ...written } : this.read(this.base.hold(nonce));
  }

  async op(key: string): Promise<OpRecord | undefined> {
    await this.ready();
    const written = this.overlay.ops.get(key);
    return written
      ? { ...written, answer: written.answer === undefined ? undefined : structuredClone(written.answer) }
      : this.read(this.base.op(key));
  }

  async minted(): Promise<string> {
    await this.ready();
    return this.overlay.minted ?? this.read(this.base.minted());
  }

  async dueOf(payer: string, now: number): Promise<string[]> {
    await this.ready();
    const nonces = await this.read(this.base.dueOf(payer, now));
    if (this.overlay.holds.size === 0) return nonces;
    // Their records are in the transaction's memory already (dueOf read and locked them): no round trip.
    const stored = [];
    for (const nonce of nonces) stored.push({ nonce, expires: (await this.read(this.base.hold(nonce)))?.expires ?? now });
    return this.overlay.dueOf(payer, now, stored);
  }
}

/**
 * Runs `fns` one after another in the transaction `base` reads through, their declared plans read first
 * in one statement. Answers each op's outcome and the writes of all; never commits (the store does).
 */
export async function runBatch(base: BatchReads, fns: TransactFn[]): Promise<BatchResult> {
  const overlay = new Overlay();
  const batch: { failed?: { error: unknown } } = {};
  const views = fns.map(() => new OpView(overlay, base, batch));
  // Each function runs up to its prefetch, which only records its plan.
  const running = fns.map((fn, i) => {
    let p: ReturnType<TransactFn>;
    try {
      p = fn(views[i]!);
    } catch (err) {
      p = Promise.reject(err);
    }
    views[i]!.starting = false;
    // Awaited in its turn below; one that throws before its first read must not count as unhandled meanwhile.
    p.catch(() => {});
    return p;
  });
  const declared = views.filter((v) => v.plan !== null);
  try {
    const claims = await base.prefetchAll(declared.map((v) => v.plan!));
    declared.forEach((v, i) => {
      v.claimed = claims[i]!;
    });
  } catch (error) {
    // Every op's first read now fails with the database's error.
    batch.failed = { error };
  }
  const outcomes: Outcome[] = [];
  for (const [i, view] of views.entries()) {
    view.open();
    try {
      const { answer, writes } = await running[i]!;
      if (batch.failed) throw batch.failed.error;
      if (writes) overlay.add(writes);
      outcomes.push({ ok: true, answer });
    } catch (error) {
      outcomes.push({ ok: false, error });
    }
  }
  return batch.failed ? { outcomes, writes: null, failed: batch.failed } : { outcomes, writes: overlay.writes() };
}
