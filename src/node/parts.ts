// What the handlers of peer messages (card desk, call desk, text tasks) use of their node.
import type { Config } from '../config/schema.js';
import type { Identity } from '../identity/store.js';
import type { Store } from '../../store/db.js';
import type { ActorHost } from '../runtime/host.js';
import type { Messenger } from '../relay/messenger.js';
import type { HubClient } from '../hub-client/client.js';

export interface NodeParts {
  dataDir: string;
  config: Config;
  identity: Identity;
  store: Store;
  host: ActorHost;
  messenger: Messenger;
  now: () => number;
  log: (line: string) => void;
  /** The hub: its ledger holds, captures and releases the payments of priced calls (SPEC §10). */
  client: HubClient;
  /** The hub's AID (prices name its ledger). */
  hubAid: () => Promise<string>;
  /** Aborted when the node stops: running service calls are dropped and left for `interruptRunning`. */
  stopping: AbortSignal;
}
