// What the handlers of peer messages (card desk, call desk, text tasks) use of their node: the card
// desk's parts (src/card/desk.ts) and what the provider adds to them. Each handler declares the narrower
// parts it uses; this one object, built by the node, satisfies them all.
import type { DeskParts } from '../card/desk.js';
import type { HubClient } from '../hub-client/client.js';

export interface NodeParts extends DeskParts {
  log: (line: string) => void;
  /** The hub: its ledger holds, captures and releases the payments of priced calls (SPEC §10). */
  client: HubClient;
  /** Aborted when the node stops: running service calls are dropped and left for `interruptRunning`. */
  stopping: AbortSignal;
}
