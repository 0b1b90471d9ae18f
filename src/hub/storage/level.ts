// The embedded backend of the hub's storage (src/hub/storage/types.ts): one LevelDB in the hub's data
// dir (`hub-store`, the layout of src/hub/store.ts, unchanged since before the interface, so older hub
// data dirs open as they are). It serves one process — LevelDB allows no other — so the atomic steps the
// interface asks for are this process's: a claim in memory before the first await, and the ledger's
// transactions one at a time through one queue, each committed as one synced batch.
import { join } from 'node:path';
import type { AbstractSublevel } from 'abstract-level';
import type { Level } from 'level';
import { timeKey } from '../../../store/db.js';
import { KeyedSerial } from '../../runtime/serial.js';
import { HubStore } from '../store.js';
import { DirectoryIndex } from '../search/index.js';
import { LevelMailbox } from './level-mailbox.js';
import { LevelBlobs } from './level-blobs.js';
import {
  WrongHubError,
  type AccountRecord,
  type AgentRecord,
  type AgentStore,
  type HoldRecord,
  type HubStorage,
  type Invite,
  type LedgerReads,
  type LedgerStore,
  type LedgerWrites,
  type NonceStore,
  type OpRecord,
  type SearchPage,
  type SearchQuery,
} from './types.js';

type Sub = AbstractSublevel<Level<string, unknown>, string | Buffer | Uint8Array, string, unknown>;

const HUB_AID = 'hub-aid';
const MINTED = 'ledger-minted';
export const historyKey = (aid: string, seq: number) => `${aid}!${seq.toString().padStart(16, '0')}`;
const expiryKey = (expires: number, hold: string) => `${timeKey(expires)}!${hold}`;
const asBytes = (b: Buffer | Uint8Array) => new Uint8Array(b.buffer, b.byteOffset, b.byteLength);

/** Opens (creating) the LevelDB storage of a hub data dir; fails StoreLockedError while another process holds it. */
export async function openLevelStorage(dataDir: string): Promise<LevelStorage> {
  return new LevelStorage(await HubStore.open(dataDir), dataDir);
}

/** The directory's index and the AIDs with keys published (the relay's recipients), from every stored agent. */
interface Directory {
  index: DirectoryIndex;
  recipients: Set<string>;
}

async function buildDirectory(store: HubStore): Promise<Directory> {
  const index = new DirectoryIndex();
  const recipients = new Set<string>();
  for await (const value of store.agents.values()) {
    const rec = value as AgentRecord;
    index.set(rec);
    if (rec.keys) recipients.add(rec.aid);
  }
  return { index, recipients };
}

export class LevelStorage implements HubStorage {
  readonly kind = 'leveldb' as const;
  readonly agents: LevelAgents;
  readonly nonces: LevelNonces;
  readonly ledger: LevelLedger;
  readonly mailbox: LevelMailbox;
  readonly blobs: LevelBlobs;

  constructor(
    /** The LevelDB itself (tests and `anet hub` commands reach its sublevels). */
    readonly store: HubStore,
    readonly where: string,
  ) {
    this.agents = new LevelAgents(store);
    this.nonces = new LevelNonces(store.nonces);
    this.ledger = new LevelLedger(store, this.nonces);
    this.mailbox = new LevelMailbox(store.db);
    this.blobs = new LevelBlobs(store.db, join(where, 'blobs'));
  }

  async bind(hubAid: string): Promise<void> {
    const stored = (await this.store.meta.get(HUB_AID)) as string | undefined;
    if (stored === undefined) await this.store.meta.put(HUB_AID, hubAid, { sync: true } as never);
    else if (stored !== hubAid) throw new WrongHubError(this.where, stored, hubAid);
    // Only a hub starting on the store binds it: it builds the directory now (seconds at 100k agents),
    // not at its first request. A command that mints, invites or verifies never builds it.
    await this.agents.directory();
  }

  async close(): Promise<void> {
    await this.ledger.idle();
    await this.blobs.close();
    await this.store.close();
  }
}

class LevelAgents implements AgentStore {
  /** Invites (their keys) being spent now: of registrations racing with one token, one gets in. */
  private readonly claimed = new Set<string>();
  /** Updates of one AID take turns (this backend serves one process). */
  private readonly serial = new KeyedSerial();

  private built: Promise<Directory> | null = null;

  constructor(private readonly store: HubStore) {}

  /** The directory, built from the store on first need (see LevelStorage.bind). */
  directory(): Promise<Directory> {
    this.built ??= buildDirectory(this.store);
    return this.built;
  }

  async get(aid: string): Promise<AgentRecord | undefined> {
    return this.store.agent(aid);
  }

  async put(rec: AgentRecord): Promise<void> {
    await this.store.agents.put(rec.aid, rec);
    await this.written(rec);
  }

  update(aid: string, fn: (current: AgentRecord | undefined) => AgentRecord | null): Promise<AgentRecord | null> {
    return this.serial.run(aid, async () => {
      const next = fn(await this.store.agent(aid));
      if (next) await this.put(next);
      return next;
    });
  }

  /**
   * The index and the recipients follow every write, once it is on disk (a directory still being built
   * read the store before or after it: applied here too, the later version wins either way).
   */
  private async written(rec: AgentRecord): Promise<void> {
    const { index, recipients } = await this.directory();
    index.set(rec);
    if (rec.keys) recipients.add(rec.aid);
  }

  admit(rec: AgentRecord, inviteKey: string, now: number): Promise<'ok' | 'unknown' | 'used' | 'exists'> {
    // In the AID's turn, as updates are: a first registration of the same AID racing this one is not overwritten.
    return this.serial.run(rec.aid, () => this.admitNow(rec, inviteKey, now));
  }

  private async admitNow(rec: AgentRecord, inviteKey: string, now: number): Promise<'ok' | 'unknown' | 'used' | 'exists'> {
    // Claimed before any await: one token, one new AID, however many race for it.
    if (this.claimed.has(inviteKey)) return 'used';
    this.claimed.add(inviteKey);
    try {
      if (await this.store.agent(rec.aid)) return 'exists';
      const found = (await this.store.invites.get(inviteKey)) as Invite | undefined;
      if (!found) return 'unknown';
      if (found.usedBy !== null) return 'used';
      const spent: Invite = { ...found, usedBy: rec.aid, usedAt: now };
      await this.store.db.batch(
        [
          { type: 'put', sublevel: this.store.agents, key: rec.aid, value: rec },
          { type: 'put', sublevel: this.store.invites, key: inviteKey, value: spent },
        ] as never,
        { sync: true },
      );
      await this.written(rec);
      return 'ok';
    } finally {
      this.claimed.delete(inviteKey);
    }
  }

  async invite(key: string, invite: Invite): Promise<void> {
    await this.store.invites.put(key, invite, { sync: true } as never);
  }

  async search(query: SearchQuery): Promise<SearchPage> {
    return (await this.directory()).index.search(query, (aid) => this.store.agent(aid));
  }

  async isRecipient(aid: string): Promise<boolean> {
    return (await this.directory()).recipients.has(aid);
  }
}

export class LevelNonces implements NonceStore {
  /** `<aid>!<nonce>` being claimed now: a copy arriving meanwhile is refused at once. */
  private readonly checking = new Set<string>();

  constructor(private readonly nonces: Sub) {}

  async claim(aid: string, nonce: string, time: number): Promise<boolean> {
    const key = `${aid}!${nonce}`;
    if (this.checking.has(key)) return false;
    this.checking.add(key);
    try {
      if ((await this.nonces.get(key)) !== undefined) return false;
      await this.nonces.put(key, time);
      return true;
    } finally {
      this.checking.delete(key);
    }
  }

  async prune(before: number): Promise<void> {
    const old: string[] = [];
    for await (const [k, t] of this.nonces.iterator()) if ((t as number) < before) old.push(k);
    if (old.length) await this.nonces.batch(old.map((key) => ({ type: 'del' as const, key })));
  }
}

export class LevelLedger implements LedgerStore {
  private readonly serial = new KeyedSerial();

  constructor(
    private readonly store: HubStore,
    private readonly nonces: NonceStore,
  ) {}

  /** One at a time: each transaction reads what the one before it wrote, and commits as one synced batch. */
  transact<T>(fn: (reads: LedgerReads) => Promise<{ answer: T; writes: LedgerWrites | null }>): Promise<T> {
    return this.serial.run('ledger', async () => {
      const { answer, writes } = await fn(this.reads);
      if (writes) await this.commit(writes);
      return answer;
    });
  }

  /** Resolves once every transaction queued so far has finished. */
  idle(): Promise<void> {
    return this.serial.run('ledger', async () => {});
  }

  private readonly reads: LedgerReads = {
    // Reads are local and transactions run one at a time: nothing to gain from fetching ahead. A claim is
    // stored at once, as the hub's claims are (it stays, whatever the transaction does).
    prefetch: async ({ claim }) => {
      if (!claim) return true;
      if (!(await this.nonces.claim(claim.aid, claim.nonce, claim.time))) return false;
      claim.taken = true;
      return true;
    },
    account: async (aid) => (await this.store.accounts.get(aid)) as AccountRecord | undefined,
    entry: async (aid, seq) => {
      const b = (await this.store.history.get(historyKey(aid, seq), { valueEncoding: 'buffer' })) as Buffer | undefined;
      return b === undefined ? undefined : asBytes(b);
    },
    hold: async (nonce) => (await this.store.holds.get(nonce)) as HoldRecord | undefined,
    op: async (key) => (await this.store.ops.get(key)) as OpRecord | undefined,
    minted: () => this.minted(),
    dueOf: async (payer, now) => {
      const due: string[] = [];
      for (const hold of await this.due(now, Number.MAX_SAFE_INTEGER)) {
        const rec = (await this.store.holds.get(hold)) as HoldRecord | undefined;
        if (rec?.from === payer) due.push(hold);
      }
      return due;
    },
  };

  private async commit(w: LedgerWrites): Promise<void> {
    const { store } = this;
    const ops: unknown[] = [];
    for (const [aid, rec] of w.accounts) ops.push({ type: 'put', sublevel: store.accounts, key: aid, value: rec });
    for (const e of w.entries)
      ops.push({
        type: 'put',
        sublevel: store.history,
        key: historyKey(e.aid, e.seq),
        value: Buffer.from(e.bytes),
        valueEncoding: 'buffer',
      });
    for (const [nonce, rec] of w.holds) {
      ops.push({ type: 'put', sublevel: store.holds, key: nonce, value: rec });
      // Open holds are indexed by expiry (the sweep's and dueOf's reads); a settled one leaves the index.
      if (rec.expires !== null) {
        const key = expiryKey(rec.expires, nonce);
        ops.push(
          rec.state === 'held' ? { type: 'put', sublevel: store.expiries, key, value: '' } : { type: 'del', sublevel: store.expiries, key },
        );
      }
    }
    if (w.op) ops.push({ type: 'put', sublevel: store.ops, key: w.op.key, value: { digest: w.op.digest, answer: w.op.answer } });
    if (w.minted !== null) ops.push({ type: 'put', sublevel: store.meta, key: MINTED, value: w.minted });
    // An acknowledged payment must survive power loss, as the node's journal does.
    await store.db.batch(ops as never, { sync: true });
  }

  async due(now: number, limit: number): Promise<string[]> {
    const due: string[] = [];
    for await (const key of this.store.expiries.keys({ lt: timeKey(now + 1), limit })) due.push(key.slice(key.indexOf('!') + 1));
    return due;
  }

  async recent(aid: string, limit: number): Promise<Uint8Array[]> {
    const out: Uint8Array[] = [];
    for await (const b of this.store.history.values({ gt: `${aid}!`, lt: `${aid}!~`, reverse: true, limit, valueEncoding: 'buffer' }))
      out.push(asBytes(b as Buffer));
    return out.reverse();
  }

  async *accounts(): AsyncIterable<[string, AccountRecord]> {
    for await (const [aid, rec] of this.store.accounts.iterator()) yield [aid, rec as AccountRecord];
  }

  async *history(): AsyncIterable<{ aid: string; seq: number; bytes: Uint8Array }> {
    for await (const [key, bytes] of this.store.history.iterator({ valueEncoding: 'buffer' })) {
      const bang = key.lastIndexOf('!');
      yield { aid: key.slice(0, bang), seq: Number(key.slice(bang + 1)), bytes: asBytes(bytes as Buffer) };
    }
  }

  async entries(keys: { aid: string; seq: number }[]): Promise<(Uint8Array | undefined)[]> {
    const values = (await this.store.history.getMany(
      keys.map((k) => historyKey(k.aid, k.seq)),
      { valueEncoding: 'buffer' },
    )) as (Buffer | undefined)[];
    return values.map((b) => (b === undefined ? undefined : asBytes(b)));
  }

  async heldTotal(): Promise<bigint> {
    let held = 0n;
    for await (const h of this.store.holds.values()) if ((h as HoldRecord).state === 'held') held += BigInt((h as HoldRecord).amount);
    return held;
  }

  async minted(): Promise<string> {
    return ((await this.store.meta.get(MINTED)) as string | undefined) ?? '0';
  }
}
