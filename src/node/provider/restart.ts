// A start after a stop (SPEC §9.5, §10), before any message is taken: nothing runs after a restart, so
// every in-flight count starts empty (CLEAR: a slot can never leak across a stop), and every call that
// was running ends INTERRUPTED — its outcome is unknown, so it is not run again. A quoted call's
// arguments are gone, so it ends the same way (nothing was charged). A paid call still owing the hub its
// settlement keeps its mark until settled (an interrupted one releases its hold, settle.ts).
import type { Config } from '../../config/schema.js';
import { offeredCapabilities } from '../../config/check.js';
import type { Store } from '../../../store/db.js';
import type { ActorHost } from '../../runtime/host.js';
import { inflight } from '../../actors/inflight.js';
import { call } from '../../actors/call.js';
import { inflightLimits } from './slots.js';
import type { Running } from './record.js';
import { answer, type ReplyParts } from './reply.js';
import { dropBlobs } from './files.js';
import type { HubClient } from '../../hub-client/client.js';

/** What ending the stopped calls uses of the node (the relay is not open yet). */
export interface RestartParts {
  config: Config;
  store: Store;
  host: ActorHost;
}

/**
 * Returns the callers to tell, the paid calls to settle once the relay is open, and the calls that had
 * ended but were still marked (their files' blobs still go from the hub).
 */
export async function interruptRunning(parts: RestartParts): Promise<{ told: Running[]; settle: Running[]; ended: Running[] }> {
  for (const cap of offeredCapabilities(parts.config)) await inflight(parts.host, cap.id).clear(inflightLimits(cap));
  const told: Running[] = [];
  const settle: Running[] = [];
  const ended: Running[] = [];
  for await (const [key, value] of parts.store.running.iterator()) {
    // A mark's value names its call (it is written with RECEIVED or STARTED, see record.ts).
    const running = value as Running;
    const record = call(parts.host, running.caller, running.task);
    const state = await record.state();
    const paid = state ? state.context.payNonce !== null : false;
    if (state?.value === 'settling' || (paid && (state?.value === 'paying' || state?.value === 'working'))) {
      if (state.value !== 'settling') await record.interrupted();
      settle.push(running);
      continue;
    }
    await parts.store.running.del(key);
    // Ended but not yet unmarked when the node stopped: its caller already has the answer.
    if (state && state.value !== 'submitted' && state.value !== 'working' && state.value !== 'quoted') {
      ended.push(running);
      continue;
    }
    await record.interrupted();
    told.push(running);
  }
  return { told, settle, ended };
}

/**
 * Tells the callers of interrupted calls, once the relay is open; their files' blobs go from the hub, and
 * those of calls that had `ended` before the stop but were still marked.
 */
export async function tellInterrupted(
  parts: ReplyParts & { client: Pick<HubClient, 'deleteBlobs'>; log: (line: string) => void },
  calls: Running[],
  ended: Running[] = [],
): Promise<void> {
  dropBlobs(
    parts.client,
    [...calls, ...ended].flatMap((r) => r.blobs ?? []),
    parts.log,
  );
  for (const r of calls) {
    await answer(parts, r.caller, r.task, {
      state: 'failed',
      reason: 'interrupted',
      detail: 'the provider stopped while the call ran; its outcome is unknown',
    }).catch(() => {});
  }
}
