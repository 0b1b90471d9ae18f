// Previews to the caller (the anet-preview extension, PROTOCOL §6.10): a service's `progress` events
// become `task.status` messages (`working`, `preview`), at most PREVIEW_PER_SECOND a second per task.
// A preview is the task's current status, so of a burst only the last one goes. Nothing is journaled or
// kept: a preview lives in memory until it is sealed, and in the relay for PREVIEW_TTL_MS at most.
import { PREVIEW_PER_SECOND, type Preview } from '../../protocol/preview.js';
import type { Reply } from './reply.js';

/** A preview is worth nothing once the next one is due: it may wait in the hub this long, no more. */
export const PREVIEW_TTL_MS = 30_000;
const GAP_MS = 1000 / PREVIEW_PER_SECOND;

export interface PreviewSender {
  push(p: Preview): void;
  /** The call has ended: a preview not sent yet is dropped (the result supersedes it). */
  close(): void;
}

/** Sends previews through `reply` (a reply with PREVIEW_TTL_MS), coalesced; `now` is the node's clock. */
export function previewSender(reply: Reply, now: () => number, log: (line: string) => void): PreviewSender {
  let lastAt = -Infinity;
  let pending: Preview | null = null;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  const send = (p: Preview) => {
    lastAt = now();
    void reply({ state: 'working', preview: JSON.stringify(p) }).catch((err) => log(`preview not sent: ${(err as Error).message}`));
  };
  const flush = () => {
    timer = undefined;
    if (closed || !pending) return;
    const p = pending;
    pending = null;
    send(p);
  };
  return {
    push(p) {
      if (closed) return;
      const wait = lastAt + GAP_MS - now();
      if (wait <= 0 && !timer) return send(p);
      pending = p;
      timer ??= setTimeout(flush, Math.max(0, wait));
    },
    close() {
      closed = true;
      pending = null;
      clearTimeout(timer);
    },
  };
}
