// A service's streamed answer (SPEC §3, issue 21): `Content-Type: text/event-stream`, read as it arrives.
// `progress` events are previews, passed on as they come; the first `result` or `error` event ends the
// answer. What the end means (a result's checks, an error's status) is for call.ts to decide, by the same
// rules as a plain answer; this module only reads events. Parsing is eventsource-parser's (the WHATWG
// rules: CR, LF or CRLF line ends, multi-line data, comments, a BOM), fed decoded text so a character
// split across two chunks stays whole.
import type { IncomingMessage } from 'node:http';
import { createParser, type EventSourceMessage, type ParseError } from 'eventsource-parser';
import { MAX_PREVIEW_BYTES, readPreview, type Preview } from '../protocol/preview.js';

/** How a streamed answer ended: its final event's data as written, or why there was none. */
export type StreamEnd =
  | { kind: 'result'; data: string }
  | { kind: 'error'; data: string }
  /** The service ended its answer without a result or error event. */
  | { kind: 'ended' }
  /** The connection broke before a result or error event. */
  | { kind: 'broken' }
  /** One event was larger than the limit: reading stopped there. */
  | { kind: 'too_large' };

/** Whether a `Content-Type` is `text/event-stream` (any parameters, any case). */
export function isEventStream(contentType: string | undefined): boolean {
  return contentType?.split(';')[0]?.trim().toLowerCase() === 'text/event-stream';
}

/**
 * Reads events until the first `result` or `error` one (or the stream's end). `maxEventChars` bounds
 * what the parser may hold of one unfinished event, so a service cannot fill memory with an endless
 * line; the caller still checks a result's size in bytes.
 */
export function readEventStream(res: IncomingMessage, maxEventChars: number, onProgress?: (p: Preview) => void): Promise<StreamEnd> {
  return new Promise((resolve) => {
    let done = false;
    const end = (how: StreamEnd) => {
      if (done) return;
      done = true;
      resolve(how);
    };
    const parser = createParser({
      maxBufferSize: maxEventChars,
      onEvent: (event) => onEvent(event, end, onProgress),
      // Only an overflow matters: unknown fields and bad `retry` values are ignored, as a browser would.
      onError: (err: ParseError) => {
        if (err.type === 'max-buffer-size-exceeded') end({ kind: 'too_large' });
      },
    });
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      // Events after the final one are not read: the call is over and its connection is closed.
      if (!done) parser.feed(chunk);
    });
    res.on('end', () => end({ kind: 'ended' }));
    res.on('aborted', () => end({ kind: 'broken' }));
    res.on('error', () => end({ kind: 'broken' }));
    res.on('close', () => end(res.complete ? { kind: 'ended' } : { kind: 'broken' }));
  });
}

function onEvent(event: EventSourceMessage, end: (how: StreamEnd) => void, onProgress?: (p: Preview) => void): void {
  if (event.event === 'result' || event.event === 'error') end({ kind: event.event, data: event.data });
  else if (event.event === 'progress' && onProgress) progress(event.data, onProgress);
  // Any other event name (including the default `message`) is not part of the contract: ignored.
}

/** A `progress` event's data as a preview; a bad or oversize one is dropped and the call goes on. */
function progress(data: string, onProgress: (p: Preview) => void): void {
  if (Buffer.byteLength(data, 'utf8') > MAX_PREVIEW_BYTES) return;
  let preview: Preview | null;
  try {
    preview = readPreview(JSON.parse(data));
  } catch {
    return;
  }
  if (!preview) return;
  try {
    onProgress(preview);
  } catch {
    // Whoever passes previews on must not end the call: it runs inside the socket's 'data' handler,
    // where a throw would be an uncaught exception for the whole node.
  }
}
