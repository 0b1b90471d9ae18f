// The service step of a capability call (SPEC §3, §9.1): the operator's service is called over its
// local URL with the arguments (and files), and a caller whose call takes a while hears `working` — and,
// with `modules.preview.enabled`, the service's progress previews (previews.ts). Journals nothing: the
// call's outcome event is the step after this one.
import type { Config } from '../../config/schema.js';
import type { OfferedCapability } from '../../config/check.js';
import { callService, type checkTarget, type ServiceOutcome, type StreamBody } from '../../service/call.js';
import { parseServiceUrl, type ServiceUrl } from '../../service/url.js';
import { streamBody, type FileOut } from './files.js';
import type { Running } from './record.js';
import { replyTo, type Reply, type ReplyParts } from './reply.js';
import type { Preview } from '../../protocol/preview.js';
import { PREVIEW_TTL_MS, previewSender, type PreviewSender } from './previews.js';
import type { Cancelable } from './cancels.js';

/** A call still running after this long sends the caller `task.status working`. */
const WORKING_AFTER_MS = 500;

/** What calling the service uses of the node. */
export interface ServiceParts {
  now: () => number;
  /** Its hub: a call's files are read from there as the service's request is written (issue 20). */
  config: Config;
  /** Aborted when the node stops: the running call is dropped and left for the next start. */
  stopping: AbortSignal;
}

export type ServiceTarget = { url: ServiceUrl; timeoutMs: number; tokenFile?: string };

/** Where a capability's service listens, and for how long a call may run. */
export function target(config: Config, cap: OfferedCapability): ServiceTarget {
  const module = config.modules.service;
  const tokenFile = cap.service.token_file ?? module.token_file;
  return {
    url: parseServiceUrl(cap.service.url) as ServiceUrl,
    timeoutMs: cap.service.timeout_ms ?? module.timeout_ms,
    ...(tokenFile ? { tokenFile } : {}),
  };
}

/** How one call runs: `run.signal` aborts it (the node stops, or its caller cancels), `preview` passes progress on. */
export interface RunningCall {
  run: Cancelable;
  preview?: PreviewSender;
}

/** The service call, with a `working` status to the caller when it takes a while. */
export async function serve(
  parts: ServiceParts,
  call: Running,
  argsText: string,
  files: FileOut[],
  service: ServiceTarget,
  socketCheck: ReturnType<typeof checkTarget>,
  reply: Reply,
  how: RunningCall,
): Promise<ServiceOutcome> {
  // A quick call needs no progress message; a slow one tells the caller it is running.
  const status = setTimeout(() => void reply({ state: 'working' }).catch(() => {}), WORKING_AFTER_MS);
  const preview = how.preview;
  return callService(
    service,
    {
      caller: call.caller,
      callId: call.task,
      capability: call.capability,
      body: serviceBody(parts.config.hub, argsText, files, how.run.signal),
      ...(preview ? { onProgress: (p: Preview) => preview.push(p) } : {}),
    },
    parts.now,
    how.run.signal,
    socketCheck,
  ).finally(() => {
    clearTimeout(status);
    preview?.close();
  });
}

/**
 * The previews of one call, when the node forwards them (`modules.preview.enabled`); none otherwise, so a
 * service's progress events are read and dropped. Sent with a short lifetime: a late preview is worthless.
 */
export function previewsOf(parts: ReplyParts & { log: (line: string) => void }, call: Running): PreviewSender | undefined {
  if (!parts.config.modules.preview.enabled) return undefined;
  return previewSender(replyTo(parts, call.caller, call.task, false, PREVIEW_TTL_MS), parts.now, parts.log);
}

/**
 * The argument object itself, or `{args, files}` with the node's own media types (SPEC §3), streamed:
 * files are read from the hub as the request is written.
 */
function serviceBody(hub: string, argsText: string, files: FileOut[], signal: AbortSignal): Uint8Array | StreamBody {
  if (files.length === 0) return Buffer.from(argsText);
  return streamBody(hub, argsText, files, signal);
}
