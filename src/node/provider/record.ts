// The call record (SPEC §4, §9, §14): every inbound task is a call machine (`call/<caller>/<task>`, see
// src/actors/call.ts) whose events are journaled before they take effect. This file holds the steps
// every kind of call shares: RECEIVED (sizes and a hash of the payload only), REFUSED, and the outcome
// events, with the records that go in their batches (the running mark, the kept payload).
import { randomHex } from '../../util/random.js';
import { sha256 } from '@noble/hashes/sha2.js';
import type { Config } from '../../config/schema.js';
import { offeredCapabilities } from '../../config/check.js';
import { resultHash } from '../../protocol/receipt.js';
import type { ServiceOutcome } from '../../service/call.js';
import type { Alongside, Call, OutcomeEvent } from '../../actors/call.js';
import { replyTo, type Reply, type ReplyParts } from './reply.js';
import type { Admission } from './slots.js';
import type { FileOut, Refusal } from './checks.js';
import type { Log } from '../../util/log.js';

/**
 * What the provider tells the node's metrics (src/node/metrics.ts): capability ids and reason codes only,
 * never who called or with what.
 */
export interface CallMetrics {
  /**
   * A call admitted: it counts as in flight until the function returned is called with how it ended
   * (`outcomeOf`, `canceled`, or `stopped` when the node stopped under it).
   */
  callAdmitted(capability: string): (outcome: string) => void;
  callRefused(capability: string, reason: string): void;
}

/** A call's running mark (`running` sublevel): what the next start needs to end it `interrupted`. */
export interface Running {
  caller: string;
  task: string;
  capability: string;
  /** The blob CIDs of its files (issue 20): deleted from the hub once the call has ended, even after a restart. */
  blobs?: string[];
}

/** What a kept call leaves in `payloads`: its result, and the receipt it was answered with. */
export interface Kept {
  result?: string | null;
  receipt?: Uint8Array;
  receiptKsn?: number;
}

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/**
 * Journals a task's RECEIVED (sizes and a hash of its payload only); false for a resend: only the
 * first RECEIVED of a task id takes (each delivery's random nonce tells which one did).
 */
export function receive(record: Call, call: Running, payload: Uint8Array, alongside: Alongside = []): Promise<boolean> {
  const nonce = randomHex(8);
  return record.received(
    { nonce, task: call.task, caller: call.caller, capability: call.capability, argsBytes: payload.length, argsHash: hex(sha256(payload)) },
    alongside,
  );
}

/** The running mark written in RECEIVED's batch: a crash from then on ends the call `interrupted`. */
export const runningMark = (record: Call, call: Running): Alongside => [{ sublevel: 'running', key: record.id, value: call }];

/** Written with the event that ends a call: its running mark goes, its payload (if kept) comes. */
export function ending(record: Call, payload: unknown): Alongside {
  return [
    { sublevel: 'running', key: record.id },
    ...(payload === null ? [] : [{ sublevel: 'payloads' as const, key: record.id, value: payload }]),
  ];
}

/** A `discard` capability's journal holds no words that may carry its payload (file names, echoes). */
export const discards = (config: Config, capability: string) =>
  offeredCapabilities(config).some((c) => c.id === capability && c.inbound.discard);

/**
 * The step after a call's RECEIVED and its admission, free or priced: a repeat of its task id gives back
 * what it took and is answered as a repeat (`resend`); a refusal is journaled and answered (`refused`); an
 * admitted call gets the reply it will be answered with.
 */
export async function afterAdmission(
  parts: ReplyParts & { metrics: CallMetrics },
  record: Call,
  call: Running,
  first: boolean,
  decision: Admission,
): Promise<'resend' | 'refused' | { admitted: Extract<Admission, { admitted: true }>; reply: Reply }> {
  if (!first) {
    if (decision.admitted) await decision.release(true);
    return 'resend';
  }
  const reply = replyTo(parts, call.caller, call.task, decision.listed);
  if (!decision.admitted) {
    await refuse(parts, record, decision, reply, call.capability);
    return 'refused';
  }
  return { admitted: decision, reply };
}

/** Journals REFUSED (the call's mark goes in its batch), then tells the caller `rejected`. */
export async function refuse(
  parts: { config: Config; metrics: CallMetrics },
  record: Call,
  r: Omit<Refusal, 'admitted'>,
  reply: Reply,
  capability: string,
): Promise<void> {
  parts.metrics.callRefused(capability, r.reason);
  const detail = r.detail && !discards(parts.config, capability) ? { detail: r.detail } : {};
  await record.refused(
    { reason: r.reason, ...(r.retryAfterMs !== undefined ? { retryAfterMs: r.retryAfterMs } : {}), ...detail },
    ending(record, null),
  );
  await reply({ state: 'rejected', reason: r.reason, retry_after_ms: r.retryAfterMs, detail: r.detail });
}

/** What a call without `discard` leaves for the operator: its arguments, its files' digests, its result. */
export function payloadOf(argsText: string, files: FileOut[], outcome: ServiceOutcome): unknown {
  const fileDigests = files.map((f) => {
    // A blob file was hashed as it streamed to the service (no digest: it was not read whole).
    if ('ref' in f) return { name: f.name, mime: f.mime, bytes: f.ref.size, sha256: f.sha256 ?? null };
    const bytes = Buffer.from(f.data_b64, 'base64');
    return { name: f.name, mime: f.mime, bytes: bytes.length, sha256: hex(sha256(bytes)) };
  });
  return { args: argsText, files: fileDigests, result: outcome.state === 'completed' ? outcome.text : null };
}

/** How a service's answer ended a call, as a metric's label: `completed`, or its reason code (a fixed list). */
export const outcomeOf = (outcome: ServiceOutcome): string => (outcome.state === 'completed' ? 'completed' : outcome.reason);

/** The journal's record of a service outcome: sizes and hashes, the reason, never the payload. */
export function outcomeEvent(
  parts: { config: Config; log: Log },
  call: Running,
  outcome: ServiceOutcome,
  receipt = '',
  hash?: Uint8Array,
): OutcomeEvent {
  if (outcome.state === 'completed')
    return {
      type: 'COMPLETED',
      resultBytes: Buffer.byteLength(outcome.text),
      resultHash: hex(hash ?? resultHash(outcome.result)),
      receipt,
    };
  if (outcome.state === 'rejected')
    return { type: 'SERVICE_REJECTED', message: discards(parts.config, call.capability) ? '' : outcome.message };
  if (outcome.operatorDetail) parts.log(`call ${call.task} (${call.capability}): ${outcome.reason}: ${outcome.operatorDetail}`, 'warn');
  return {
    type: 'FAILED',
    reason: outcome.reason,
    ...(outcome.detail ? { detail: outcome.detail } : {}),
    ...(outcome.retryAfterMs !== undefined ? { retryAfterMs: outcome.retryAfterMs } : {}),
  };
}
