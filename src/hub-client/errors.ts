// The errors of the hub client: the hub not reached, or its refusal (client.ts and blobs.ts throw them).
import { oneLine } from '../util/text.js';

export class HubUnreachableError extends Error {
  override name = 'HubUnreachableError';
  constructor(
    readonly hub: string,
    cause: unknown,
  ) {
    super(
      `cannot reach the hub at ${hub} (${(cause as Error)?.cause ? ((cause as Error).cause as Error).message : (cause as Error).message}); is it running? (\`anet hub start\`)`,
    );
  }
}

/**
 * A refusal from the hub, as one line: `the hub refused: CODE: what the hub said` (its text cut to one line
 * of 300 characters: a hub's message never spreads over a node's output). Codes a node meets in the normal
 * course: UNKNOWN_RECIPIENT (the hub holds envelopes only for its registered nodes), INVITE_REQUIRED and
 * BAD_INVITE (a hub that admits new AIDs by invitation), RATE_LIMITED (too many new AIDs from one
 * address), BUSY (retry shortly), BODY_TIMEOUT (the request body came too slowly).
 */
export class HubRefusedError extends Error {
  override name = 'HubRefusedError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(`the hub refused: ${oneLine(code, 64)}: ${oneLine(message, 300)}`);
  }
}
