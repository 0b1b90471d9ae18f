// Every peer message's type (PROTOCOL §6, §7) and the x402 fields (a2a-x402) carried inside the task
// messages. They are the wire's vocabulary: the provider, the caller, the card desk and the A2A endpoint
// all speak it, so it lives here, beside the envelope that carries it, and in none of them.
import { fromBody } from './body.js';
import type { CborValue } from '../identity/cbor.js';

/** Extended-card request and answer (PROTOCOL §3.10). */
export const CARD_REQUEST = 'card.request';
export const CARD_REPLY = 'card.reply';
/** A renewed contact credential, sent unasked after a key rotation (PROTOCOL §6.3). */
export const CONTACT_CREDENTIAL = 'contact.credential';

/** A capability call or text task and its answers (PROTOCOL §6.4–6.7). */
export const TASK_SEND = 'task.send';
export const TASK_STATUS = 'task.status';
export const TASK_RESULT = 'task.result';
/** A paid call's payment, and a caller declining a quote (PROTOCOL §7). */
export const TASK_PAY = 'task.pay';
export const TASK_CANCEL = 'task.cancel';
/** A task id: 16 to 64 lowercase hex digits, chosen by the caller. */
export const TASK_ID = /^[0-9a-f]{16,64}$/;
/** The capability name of a text task (the `chat` skill). */
export const CHAT = 'chat';

/** x402 metadata keys (a2a-x402), carried as fields of the task messages. */
export const X402_STATUS = 'x402.payment.status';
export const X402_REQUIRED = 'x402.payment.required';
export const X402_PAYLOAD = 'x402.payment.payload';
export const X402_RECEIPTS = 'x402.payment.receipts';
export const QUOTE_SIGNATURE = 'anet.quote.signature';

/** A task message's fields and its task id; null when it names no valid task (such a message is dropped). */
export function taskMessage(m: { body: CborValue }): { body: Record<string, CborValue>; task: string } | null {
  const body = fromBody(m.body);
  const task = body?.task;
  return body && typeof task === 'string' && TASK_ID.test(task) ? { body, task } : null;
}
