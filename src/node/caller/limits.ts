// What a caller is told when its task does not fit the relay (PROTOCOL §5: one sealed message at most
// MAX_MESSAGE): said in its own terms (its arguments or text) before anything is uploaded, where the hub
// would only have said TOO_LARGE after the whole upload. Files never ride in the message (they are blobs,
// files.ts), so only arguments and text can be too large.
import { MessageTooLargeError } from '../../relay/client.js';
import { MAX_MESSAGE, mib } from '../../protocol/relay.js';
import type { CborValue } from '../../identity/cbor.js';

/** A send's failure as the caller reads it: a message too large names what is too large. */
export function sendFailure(err: unknown, body: Map<string, CborValue>): Error {
  return err instanceof MessageTooLargeError ? new MessageTooLargeError(err.size, tooLargeLine(err.size, body)) : (err as Error);
}

/** The one line a caller reads when its sealed message is over the relay's limit: what, by how much, and what to do. */
function tooLargeLine(size: number, body: Map<string, CborValue>): string {
  const limit = `the relay carries at most ${mib(MAX_MESSAGE)} per message`;
  if (body.has('capability')) return `the call's arguments are ${mib(size)} sealed; ${limit}: send smaller arguments`;
  return `the text is ${mib(size)} sealed; ${limit}: send a shorter text`;
}
