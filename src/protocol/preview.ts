// Progress previews (the anet-preview extension, PROTOCOL §6.10): what a service or the local agent may
// say while it works, before its one result. A preview is the task's current status, not a piece of
// output: when several come close together only the last is passed on (at most PREVIEW_PER_SECOND a task).

/** One `progress` event of a service's `text/event-stream` answer: text, data, or both. */
export interface Preview {
  text?: string;
  data?: Record<string, unknown>;
}

/** At most this many previews a second reach a caller, per task. */
export const PREVIEW_PER_SECOND = 4;
/** The shortest time between two previews of one task, on the provider's side and again on the caller's. */
export const PREVIEW_GAP_MS = 1000 / PREVIEW_PER_SECOND;
/** The largest preview, as JSON text: a larger `progress` event is dropped (the call goes on). */
export const MAX_PREVIEW_BYTES = 16 * 1024;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A preview from untrusted JSON (a service's event, a provider's message), or null when it is not one. */
export function readPreview(value: unknown): Preview | null {
  if (!isObject(value)) return null;
  const out: Preview = {};
  if (typeof value.text === 'string') out.text = value.text;
  if (isObject(value.data)) out.data = value.data;
  if (out.text === undefined && out.data === undefined) return null;
  return out;
}
