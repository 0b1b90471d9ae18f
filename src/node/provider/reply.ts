// The provider's answers to a caller (SPEC §7, §9): `task.status` while a call is under way,
// `task.result` once it ended, sealed to the caller and sent through the relay; a final answer to a peer
// on our lists carries a fresh contact credential. Journals nothing (the credential is recorded in
// `issued`).
import { MAX_MESSAGE_TTL_MS, PROMPT_MESSAGE_TTL_MS } from '../../protocol/envelope.js';
import { toBody } from '../../protocol/body.js';
import { TASK_RESULT, TASK_STATUS } from '../../protocol/messages.js';
import type { CborValue } from '../../identity/cbor.js';
import type { Config } from '../../config/schema.js';
import type { Identity } from '../../identity/store.js';
import type { Store } from '../../../store/db.js';
import type { Messenger } from '../../relay/messenger.js';
import { standing } from '../../contacts/lists.js';
import { issueAndRecord } from '../../contacts/credential.js';

/** What answering uses of the node. */
export interface ReplyParts {
  dataDir: string;
  config: Config;
  identity: Identity;
  store: Store;
  messenger: Messenger;
  now: () => number;
}

/** The fields of a `task.status` or `task.result` body (PROTOCOL §6). */
export type Fields = Record<string, CborValue | undefined>;

/** Answers one caller's task; with `after`, the answer is sealed at once but sent only once `after` resolves. */
export type Reply = (fields: Fields, after?: Promise<unknown>) => Promise<void>;

const FINAL = ['completed', 'failed', 'rejected', 'canceled'];
/** A call's answer lives as long as the call's request: its caller waits for it. */
const RESULT_TTL_MS = PROMPT_MESSAGE_TTL_MS - 60_000;
/** A text task's answer waits in the hub's mailbox for an offline caller as long as a receiver accepts. */
export const TEXT_REPLY_TTL_MS = MAX_MESSAGE_TTL_MS - 60_000;

/** The reply to one task; `listed` is the caller's standing when the admission just read it. */
export const replyTo =
  (parts: ReplyParts, caller: string, task: string, listed?: boolean, ttlMs = RESULT_TTL_MS): Reply =>
  (fields, after) =>
    answer(parts, caller, task, fields, listed, after, ttlMs);

/** A reply to the caller, with a fresh contact credential when the caller is on our lists (SPEC §7). */
export async function answer(
  parts: ReplyParts,
  caller: string,
  task: string,
  fields: Fields,
  known?: boolean,
  after?: Promise<unknown>,
  ttlMs = RESULT_TTL_MS,
): Promise<void> {
  if (after) {
    // Until `after` settles, a failure here must not leave it unhandled.
    after.catch(() => {});
    // One turn of the event loop first: the journal write `after` waits for is issued then (the host
    // gathers a batch for one turn), so the seal below runs during its fsync rather than before it.
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  // The standing the admission just read, when there was one; else read now.
  const who = known === undefined ? await standing(parts.dataDir, parts.config, caller) : null;
  const listed = known ?? (who === 'allowed' || who === 'trusted');
  const final = FINAL.includes(String(fields.state));
  const credential = listed && final ? await issueAndRecord(parts.store, parts.identity, caller, parts.now()) : undefined;
  const sealed = await parts.messenger.seal(caller, final ? TASK_RESULT : TASK_STATUS, toBody({ task, ...fields, credential }), {
    ttlMs,
  });
  await after;
  await parts.messenger.deliver(sealed);
}
