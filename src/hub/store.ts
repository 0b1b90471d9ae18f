// The hub's LevelDB: agents (KEL, card wire, name, high-water), seen nonces. The hub keeps no record of
// who talked to whom.
import { Level } from 'level';
import type { AbstractSublevel } from 'abstract-level';
import { join } from 'node:path';
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

export class HubStore {
  readonly agents: Sub;
  readonly nonces: Sub;
  readonly meta: Sub;

  private constructor(readonly db: Level<string, unknown>) {
    this.agents = db.sublevel<string, unknown>('agents', { valueEncoding: msgpack }) as Sub;
    this.nonces = db.sublevel<string, unknown>('nonces', { valueEncoding: msgpack }) as Sub;
    this.meta = db.sublevel<string, unknown>('meta', { valueEncoding: msgpack }) as Sub;
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
