// Previews to the caller (the anet-preview extension, PROTOCOL §6.10): a service's `progress` events
// become `task.status` messages (`working`, `preview`), at most PREVIEW_PER_SECOND a second per task.
// A preview is the task's current status, so of a burst only the last one goes. Nothing is journaled or
// kept: a preview lives in memory until it is sealed, and in the relay for PREVIEW_TTL_MS at most.
import { PREVIEW_GAP_MS, type Preview } from '../../protocol/preview.js';
import type { Reply } from './reply.js';
import { coalescer, type Coalescer } from '../../util/coalesce.js';

/** A preview is worth nothing once the next one is due: it may wait in the hub this long, no more. */
export const PREVIEW_TTL_MS = 30_000;

/** `push` a preview; `close` once the call has ended (a preview not sent yet is dropped: the result supersedes it). */
export type PreviewSender = Coalescer<Preview>;

/** Sends previews through `reply` (a reply with PREVIEW_TTL_MS), coalesced; `now` is the node's clock. */
export function previewSender(reply: Reply, now: () => number, log: (line: string) => void): PreviewSender {
  return coalescer<Preview>(PREVIEW_GAP_MS, now, (p) => {
    void reply({ state: 'working', preview: JSON.stringify(p) }).catch((err) => log(`preview not sent: ${(err as Error).message}`));
  });
}
