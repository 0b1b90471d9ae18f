// The hub's LevelDB: agents (KEL, card wire, name, high-water), seen nonces, and the credits ledger
// (src/hub/ledger.ts). The hub keeps no record of who talked to whom, and the ledger none of what was paid for.
import type { Level } from 'level';
import type { AbstractSublevel } from 'abstract-level';
import { join } from 'node:path';
import { sha256 } from '@noble/hashes/sha2.js';
import { randomHex } from '../util/random.js';
import { msgpack } from '../../store/codec.js';
import { openLevel } from '../../store/db.js';

type Sub = AbstractSublevel<Level<string, unknown>, string | Buffer | Uint8Array, string, unknown>;

export interface AgentRecord {
  aid: string;
  name: string;
  kel: Uint8Array;
  /** The card exactly as the node signed it; null once withdrawn. */
  card: string | null;
  /** Highest card seq accepted, and the digest of that card (SEQ_ROLLBACK / SEQ_FORK survive restarts). */
  seq: string | null;
  digest: string | null;
  /** The node's signed encryption key set (WIRE §4), verified on entry. */
  keys?: Uint8Array;
  updatedAt: number;
}

/**
 * An operator's invitation to register one new AID (`anet hub invite`, PROTOCOL §8.4), kept under the
 * digest of its token: the store holds no token anyone could use.
 */
export interface Invite {
  createdAt: number;
  /** The AID whose first registration used it, and when; null while unused. */
  usedBy: string | null;
  usedAt: number | null;
}

/** An invite token: 16 random bytes, hex. */
export const isInviteToken = (token: unknown): token is string => typeof token === 'string' && /^[0-9a-f]{32}$/.test(token);
export const inviteKey = (token: string) => Buffer.from(sha256(Buffer.from(token, 'utf8'))).toString('hex');

export class HubStore {
  readonly agents: Sub;
  readonly nonces: Sub;
  readonly meta: Sub;
  /** Ledger, per AID: balance, sum of its open holds as payer (decimal strings) and its last history seq. */
  readonly accounts: Sub;
  /** Ledger, `<aid>!<seq>`: each account's history, oldest first. */
  readonly history: Sub;
  /** Ledger, per authorization nonce: the hold and its state (a `void` tombstone when released unseen). */
  readonly holds: Sub;
  /** Ledger, `<expires>!<hold>`: open holds by expiry, for the sweep. */
  readonly expiries: Sub;
  /** Ledger, per op nonce: the digest of the op's body and the answer it gave (idempotency). */
  readonly ops: Sub;
  /** Invites, by the digest of their token (see Invite). */
  readonly invites: Sub;

  private constructor(readonly db: Level<string, unknown>) {
    const sub = (name: string) => db.sublevel<string, unknown>(name, { valueEncoding: msgpack }) as Sub;
    this.agents = sub('agents');
    this.nonces = sub('nonces');
    this.meta = sub('meta');
    this.accounts = sub('accounts');
    this.history = sub('history');
    this.holds = sub('holds');
    this.expiries = sub('expiries');
    this.ops = sub('ops');
    this.invites = sub('invites');
  }

  static async open(dataDir: string): Promise<HubStore> {
    return new HubStore(await openLevel(join(dataDir, 'hub-store'), dataDir));
  }

  async agent(aid: string): Promise<AgentRecord | undefined> {
    return (await this.agents.get(aid)) as AgentRecord | undefined;
  }

  /** Mints an invite (synced): the token, which only its holder will know. */
  async mintInvite(now: number): Promise<string> {
    const token = randomHex(16);
    const invite: Invite = { createdAt: now, usedBy: null, usedAt: null };
    await this.invites.put(inviteKey(token), invite, { sync: true } as never);
    return token;
  }

  async close(): Promise<void> {
    await this.db.close();
  }
}
