// Sending a task (PROTOCOL §6.4): the `task.send` body and its one send through the relay. The first send
// and every resend go out here; a resend carries `resend` (the how-many-th), and once the provider has
// answered it carries no request at all: it is a status poll.
import type { Messenger } from '../../relay/messenger.js';
import { toBody } from '../../protocol/body.js';
import { MAX_MESSAGE_TTL_MS, PROMPT_MESSAGE_TTL_MS } from '../../protocol/envelope.js';
import { TASK_SEND } from '../../protocol/messages.js';
import type { CborValue } from '../../identity/cbor.js';
import { fileRefBody, type FileRef } from '../../protocol/file-ref.js';

/** What a task asks for, kept (payloads `outbox/<task>`) until the provider has answered, to send it again. */
export interface Request {
  capability?: string;
  args?: string;
  /** References to sealed blobs on the hub; inline base64 only in requests kept from before issue 20. */
  files?: (FileRef | { name: string; data_b64: string })[];
  text?: string;
}

/** The request's files that are references to blobs (the others are inline, from before issue 20). */
export const fileRefsOf = (r: Request): FileRef[] => (r.files ?? []).filter((f): f is FileRef => 'cid' in f);

/** What sending uses of the messenger. */
export type TaskSender = Pick<Messenger, 'send'>;

/** A call's lifetime: a minute under a prompt message's, for the clocks between us and the provider. */
export const MESSAGE_TTL_MS = PROMPT_MESSAGE_TTL_MS - 60_000;
/**
 * A text task's: a minute under the longest a receiver accepts (the hub's default mailbox TTL), so a
 * provider offline for days still gets it when it comes back (its operator answers when they can).
 */
export const TEXT_TASK_TTL_MS = MAX_MESSAGE_TTL_MS - 60_000;

/** `task.send`'s body; with `resend` (the how-many-th) it is a repeat, and without a request a status poll. */
export function wireBody(task: string, request: Request | null, resend?: number): Map<string, CborValue> {
  const r = request ?? {};
  const files = r.files?.length
    ? { files: r.files.map((f) => ('data_b64' in f ? toBody({ name: f.name, data_b64: f.data_b64 }) : fileRefBody(f))) }
    : {};
  return toBody({ task, capability: r.capability, args: r.args, ...files, text: r.text, resend });
}

/** One `task.send` to the provider; resolves once the relay took it. */
export function sendTask(messenger: TaskSender, to: string, body: Map<string, CborValue>): Promise<unknown> {
  // A text task (its request carries `text`, the first send and resends alike) waits in the mailbox.
  return messenger.send(to, TASK_SEND, body, { ttlMs: body.has('text') ? TEXT_TASK_TTL_MS : MESSAGE_TTL_MS });
}
