// What the hub's route handlers share for one hub (built by startHub in src/hub/server.ts).
import type { KelState } from '../identity/kel.js';
import type { HubStorage } from './storage/types.js';
import type { Relay } from './relay.js';
import type { Ledger } from './ledger.js';
import type { Budget } from './budget.js';
import type { RequestAuth } from './auth.js';
import type { Blobs } from './blobs.js';
import type { HubMetrics } from './metrics.js';
import type { Log } from '../util/log.js';

export interface HubContext {
  storage: HubStorage;
  relay: Relay;
  /** Blobs: bounds, digest check, sweep (src/hub/blobs.ts). */
  blobs: Blobs;
  ledger: Ledger;
  hubKel: KelState;
  now: () => number;
  bodyIdleMs: number;
  minBodyRate: number;
  trustProxy: boolean;
  requireInvite: boolean;
  bodies: Budget;
  /** New AIDs per client (a RateLimit, src/hub/registration.ts): 0, or the seconds to wait; null when off. */
  registrations: { take(client: string): number } | null;
  /** Signed requests: the signature, the clock window, each nonce once. */
  auth: RequestAuth;
  metrics: HubMetrics;
  /** The hub's log (src/util/log.ts): peers' AIDs at debug only (cmdHubStart masks them above it). */
  log: Log;
}
