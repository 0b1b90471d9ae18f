// What a caller is told when its task does not fit the relay (PROTOCOL §5: one sealed message at most
// MAX_MESSAGE): said in its own terms (its files, arguments or text) before anything is uploaded, where the
// hub would only have said TOO_LARGE after the whole upload.
import { MessageTooLargeError } from '../../relay/client.js';
import { MAX_MESSAGE, fileBytesThatFit, mib } from '../../protocol/relay.js';
import type { CborValue } from '../../identity/cbor.js';

/** A send's failure as the caller reads it: a message too large names what is too large. */
export function sendFailure(err: unknown, body: Map<string, CborValue>): Error {
  return err instanceof MessageTooLargeError ? new MessageTooLargeError(err.size, tooLargeLine(err.size, body)) : (err as Error);
}

/** Bytes a standard padded base64 text decodes to, without decoding it. */
const base64Bytes = (b64: string) => Math.floor((b64.length * 3) / 4) - (b64.endsWith('==') ? 2 : b64.endsWith('=') ? 1 : 0);

/** The one line a caller reads when its sealed message is over the relay's limit: what, by how much, and what to do. */
function tooLargeLine(size: number, body: Map<string, CborValue>): string {
  const limit = `the relay carries at most ${mib(MAX_MESSAGE)} per message`;
  const files = body.get('files');
  if (Array.isArray(files) && files.length > 0) {
    const raw = files.reduce<number>((sum, f) => sum + base64Bytes(String((f as Map<string, CborValue>).get('data_b64') ?? '')), 0);
    const fits = fileBytesThatFit(Buffer.byteLength(String(body.get('args') ?? '')));
    const what = files.length === 1 ? 'file' : `${files.length} files`;
    return `the call's ${what} (${mib(raw)}) ${files.length === 1 ? 'is' : 'are'} ${mib(size)} sealed (base64, padded to a power of two); ${limit}: send fewer or smaller files (about ${mib(fits)} in all fits)`;
  }
  if (body.has('capability')) return `the call's arguments are ${mib(size)} sealed; ${limit}: send smaller arguments`;
  return `the text is ${mib(size)} sealed; ${limit}: send a shorter text`;
}
