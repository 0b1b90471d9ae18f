// What the handlers of peer messages (card desk, call desk, text tasks) use of their node: the card
// desk's parts (src/card/desk.ts) and what the provider adds to them. Each handler declares the narrower
// parts it uses; this one object, built by the node, satisfies them all.
import type { DeskParts } from '../card/desk.js';
import type { HubClient } from '../hub-client/client.js';
import type { CallMetrics } from './provider/record.js';
import type { Log } from '../util/log.js';

export interface NodeParts extends DeskParts {
  log: Log;
  /** The hub: its ledger holds, captures and releases the payments of priced calls (SPEC §10). */
  client: HubClient;
  /** Aborted when the node stops: running service calls are dropped and left for `interruptRunning`. */
  stopping: AbortSignal;
  /** The node's metrics (src/node/metrics.ts). */
  metrics: CallMetrics;
}
