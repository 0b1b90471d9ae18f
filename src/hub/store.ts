// The hub's LevelDB, the layout of the embedded storage (src/hub/storage/level.ts): agents (KEL, card wire,
// name, high-water), seen nonces, invites, the credits ledger (src/hub/ledger.ts) and the mailboxes. The hub keeps no record of who talked to whom, and the ledger none of what was paid for.
import type { Level } from 'level';
import type { AbstractSublevel } from 'abstract-level';
import { join } from 'node:path';
import { sha256 } from '@noble/hashes/sha2.js';
import { msgpack } from '../../store/codec.js';
import { openLevel } from '../../store/db.js';
import type { AgentRecord } from './storage/types.js';

type Sub = AbstractSublevel<Level<string, unknown>, string | Buffer | Uint8Array, string, unknown>;

export type { AgentRecord, Invite } from './storage/types.js';

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

  async close(): Promise<void> {
    await this.db.close();
  }
}
