// SPEC §3, §3.1 / issue 21: services that answer with Server-Sent Events — previews as they come, then one
// result or error event — against real services on Unix sockets: the streaming test service of
// test/helpers/stream-service.ts, and raw node:http servers for streams that misbehave on purpose.
import test, { type ExecutionContext } from 'ava';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { privateSocketDir, sseEvent, streamService, type StreamServiceOptions } from './helpers/stream-service.js';
import { listenOnSocket } from '../src/service/sample.js';
import { callService, MAX_RESULT_BYTES, type ServiceOutcome } from '../src/service/call.js';
import { parseServiceUrl, type ServiceUrl } from '../src/service/url.js';
import { MAX_PREVIEW_BYTES, type Preview } from '../src/protocol/preview.js';

const call = { caller: 'bafyreicaller', callId: 'call-1', capability: 'text.summarize', body: Buffer.from('{"text":"hi"}') };
const urlOf = (path: string) => parseServiceUrl(`unix://${path}`) as ServiceUrl;

/** Calls the service, collecting its previews; `events` records previews and the end in arrival order. */
async function run(
  url: ServiceUrl,
  opts: { timeoutMs?: number; signal?: AbortSignal; onProgress?: (p: Preview) => void } = {},
): Promise<{ outcome: ServiceOutcome; previews: Preview[]; events: string[] }> {
  const previews: Preview[] = [];
  const events: string[] = [];
  const outcome = await callService(
    { url, timeoutMs: opts.timeoutMs ?? 5000 },
    {
      ...call,
      onProgress: (p) => {
        previews.push(p);
        events.push('progress');
        opts.onProgress?.(p);
      },
    },
    Date.now,
    opts.signal,
  );
  events.push(outcome.state);
  return { outcome, previews, events };
}

async function streaming(t: ExecutionContext, opts: StreamServiceOptions) {
  const path = join(await privateSocketDir(t), 'svc.sock');
  const svc = await streamService(path, opts);
  t.teardown(() => svc.close());
  return { svc, url: urlOf(path) };
}

/** A raw node:http service: `handler` writes whatever stream the test needs. */
async function raw(t: ExecutionContext, handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<ServiceUrl> {
  const path = join(await privateSocketDir(t), 'raw.sock');
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => handler(req, res));
  });
  const listening = await listenOnSocket(server, path);
  t.teardown(() => {
    server.closeAllConnections();
    return listening.close();
  });
  return urlOf(path);
}

const sse = (res: ServerResponse, contentType = 'text/event-stream') => res.writeHead(200, { 'content-type': contentType });
const detail = (o: ServiceOutcome) => (o as { operatorDetail?: string }).operatorDetail;

test('SPEC §3.1 / issue 21: progress events arrive as previews, in order and before the result; the result keeps every digit', async (t) => {
  const progress: Preview[] = [{ text: 'reading' }, { data: { done: 1, of: 3 } }, { text: 'writing', data: { done: 2, of: 3 } }];
  const { svc, url } = await streaming(t, { progress, delayMs: 20, result: { summary: 'ok' } });
  const { outcome, previews, events } = await run(url);
  t.deepEqual(previews, progress);
  t.deepEqual(events, ['progress', 'progress', 'progress', 'completed']);
  t.deepEqual(outcome, { state: 'completed', result: { summary: 'ok' }, text: '{"summary":"ok"}' });
  t.is(svc.requests, 1);
  t.is(svc.aborted, 0, 'a stream read to its result is not an abort');

  // The result event's data is the result's text as written: a number past 2^53 keeps its digits.
  const exact = await raw(t, (_req, res) => {
    sse(res);
    res.end(sseEvent('result', '{"n":12345678901234567890123}'));
  });
  t.like((await run(exact)).outcome, { state: 'completed', text: '{"n":12345678901234567890123}' });
});

test('SPEC §3.1 / issue 21: events split at every byte (CRLF line ends, a character split in two, comments, other events) read the same', async (t) => {
  const stream = [
    ': a comment, ignored\r\n\r\n',
    'event: progress\r\ndata: {"text":"café ☕"}\r\n\r\n',
    'event: message\r\ndata: {"text":"not a progress event"}\r\n\r\n',
    'data: {"text":"no event name"}\r\n\r\n',
    'event: progress\r\ndata: {"data":\r\ndata: {"step":2}}\r\n\r\n',
    'event: result\r\ndata: {"text":"naïve"}\r\n\r\n',
  ].join('');
  const url = await raw(t, (_req, res) => {
    sse(res, 'Text/Event-Stream; charset=utf-8');
    void (async () => {
      for (const byte of Buffer.from(stream)) {
        if (res.destroyed) return;
        res.write(Buffer.of(byte));
        await new Promise((r) => setImmediate(r));
      }
      res.end();
    })();
  });
  const { outcome, previews } = await run(url);
  t.deepEqual(previews, [{ text: 'café ☕' }, { data: { step: 2 } }]);
  t.deepEqual(outcome, { state: 'completed', result: { text: 'naïve' }, text: '{"text":"naïve"}' });
});

test('SPEC §3.1 / issue 21: an error event is mapped by the status table, as an HTTP status would be', async (t) => {
  const cases: [unknown, Record<string, unknown>][] = [
    [
      { status: 422, error: 'bad language code' },
      { state: 'rejected', reason: 'service_rejected', message: 'bad language code' },
    ],
    [
      { status: 400, error: 'x'.repeat(300) },
      { state: 'rejected', reason: 'service_rejected', message: 'x'.repeat(200) },
    ],
    [{ status: 404 }, { state: 'rejected', reason: 'service_rejected', message: '404 Not Found' }],
    [
      { status: 429, error: 'slow down' },
      { state: 'failed', reason: 'service_busy' },
    ],
    [
      { status: 503, error: 'busy' },
      { state: 'failed', reason: 'service_busy' },
    ],
    [
      { status: 502, error: 'upstream' },
      { state: 'failed', reason: 'outcome_unknown', detail: 'connection_lost' },
    ],
    [
      { status: 504, error: 'upstream' },
      { state: 'failed', reason: 'outcome_unknown', detail: 'connection_lost' },
    ],
    [
      { status: 500, error: 'boom' },
      { state: 'failed', reason: 'service_error' },
    ],
    [
      { status: 200, error: 'odd' },
      { state: 'failed', reason: 'service_error' },
    ],
    [{ error: 'no status' }, { state: 'failed', reason: 'service_error' }],
    ['not json', { state: 'failed', reason: 'service_error' }],
  ];
  let data: unknown;
  const url = await raw(t, (_req, res) => {
    sse(res);
    res.write(sseEvent('progress', { text: 'started' }));
    res.end(sseEvent('error', data));
  });
  for (const [event, expected] of cases) {
    data = event;
    const { outcome, previews } = await run(url);
    t.like(outcome, expected, JSON.stringify(event));
    if (outcome.state === 'rejected') t.is(outcome.message, expected.message as string);
    t.deepEqual(previews, [{ text: 'started' }]);
  }
  // Through the test service too.
  const { url: svc } = await streaming(t, { progress: 1, error: { status: 409, error: 'already done' } });
  t.like((await run(svc)).outcome, { state: 'rejected', reason: 'service_rejected', message: 'already done' });
});

test('SPEC §3.1 / issue 21: a stream that ends without a result, or breaks off, is outcome_unknown', async (t) => {
  let breakOff = false;
  const url = await raw(t, (_req, res) => {
    sse(res);
    // An unfinished result event (no blank line after it) is no event at all.
    res.write(`${sseEvent('progress', { text: 'half' })}event: result\ndata: {"a":1}\n`);
    if (breakOff) res.socket?.destroy();
    else res.end();
  });
  const ended = await run(url);
  t.like(ended.outcome, { state: 'failed', reason: 'outcome_unknown', detail: 'connection_lost' });
  t.is(detail(ended.outcome), 'the event stream ended without a result');
  t.deepEqual(ended.previews, [{ text: 'half' }]);
  breakOff = true;
  const broken = await run(url);
  t.like(broken.outcome, { state: 'failed', reason: 'outcome_unknown', detail: 'connection_lost' });
});

test('SPEC §3.1 / issue 21: a bad, oversize or shapeless progress event is dropped and the call goes on', async (t) => {
  const atLimit = { text: 'y'.repeat(MAX_PREVIEW_BYTES - '{"text":""}'.length) };
  const url = await raw(t, (_req, res) => {
    sse(res);
    res.write(sseEvent('progress', { text: 'first' }));
    res.write(sseEvent('progress', { text: 'z'.repeat(MAX_PREVIEW_BYTES) })); // over 16 KiB as JSON
    res.write(sseEvent('progress', '{"text": "not closed'));
    res.write(sseEvent('progress', { text: 5, data: [1, 2] })); // neither text nor data
    res.write(sseEvent('progress', atLimit)); // exactly 16 KiB: kept
    res.write(sseEvent('progress', { text: 'last' }));
    res.end(sseEvent('result', { ok: true }));
  });
  const { outcome, previews } = await run(url);
  t.deepEqual(previews, [{ text: 'first' }, atLimit, { text: 'last' }]);
  t.like(outcome, { state: 'completed', result: { ok: true } });
});

test('SPEC §3.1 / issue 21: a result over 1 MiB, or an endless event, is service_error and the connection is closed', async (t) => {
  // Just under the limit completes: the limit is the result's, not something smaller.
  const fits = { r: 'a'.repeat(MAX_RESULT_BYTES - 10) };
  const { url: ok } = await streaming(t, { result: fits });
  const fine = await run(ok);
  t.is(fine.outcome.state, 'completed');

  const { url: big } = await streaming(t, { progress: 1, result: { r: 'é'.repeat(MAX_RESULT_BYTES / 2) } }); // 1 MiB of chars, 2 MiB of bytes
  t.like((await run(big)).outcome, { state: 'failed', reason: 'service_error' });

  // One data line that never ends: reading stops past 1 MiB and some margin, and the service sees it.
  let closed = false;
  let written = 0;
  const endless = await raw(t, (_req, res) => {
    sse(res);
    res.on('close', () => {
      closed = true;
    });
    res.write('event: result\ndata: "');
    const chunk = 'b'.repeat(64 * 1024);
    const more = () => {
      while (!res.destroyed && written < 16 * MAX_RESULT_BYTES) {
        written += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', more);
      }
    };
    more();
  });
  const r = await run(endless);
  t.like(r.outcome, { state: 'failed', reason: 'service_error' });
  t.regex(detail(r.outcome) ?? '', /over 1048576 bytes/);
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.true(closed, 'the service saw its connection closed');
  t.true(written < 16 * MAX_RESULT_BYTES, 'the node stopped reading long before the service stopped writing');
});

test('SPEC §3.1 / issue 21: a result event that is not a JSON object is service_error', async (t) => {
  let data = '{"unclosed": ';
  const url = await raw(t, (_req, res) => {
    sse(res);
    res.end(sseEvent('result', data));
  });
  const bad = await run(url);
  t.like(bad.outcome, { state: 'failed', reason: 'service_error' });
  t.is(detail(bad.outcome), 'the result event is not JSON');
  for (data of ['[1,2]', '"text"', 'null']) t.like((await run(url)).outcome, { state: 'failed', reason: 'service_error' }, data);
});

test('SPEC §3 / issue 21: the first result ends the call and closes the connection; later events are not read', async (t) => {
  let closed: () => void = () => {};
  const sawClose = new Promise<void>((r) => {
    closed = r;
  });
  const url = await raw(t, (_req, res) => {
    sse(res);
    res.on('close', () => closed());
    res.write(sseEvent('result', { first: true }));
    // The service goes on (and never ends): the node must not wait for it, nor read what follows.
    const timer = setInterval(() => {
      if (res.destroyed) return clearInterval(timer);
      res.write(sseEvent('progress', { text: 'late' }) + sseEvent('result', { second: true }));
    }, 20);
  });
  const { outcome, previews } = await run(url, { timeoutMs: 2000 });
  t.deepEqual(outcome, { state: 'completed', result: { first: true }, text: '{"first":true}' });
  t.deepEqual(previews, []);
  await sawClose;
});

test('SPEC §3 / issue 21: a plain JSON answer still completes, with no previews', async (t) => {
  const url = await raw(t, (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"n": 1.50}');
  });
  const { outcome, previews } = await run(url);
  t.deepEqual(outcome, { state: 'completed', result: { n: 1.5 }, text: '{"n": 1.50}' });
  t.deepEqual(previews, []);
  // An event stream under a non-2xx status is read by its status, as before.
  const busy = await raw(t, (_req, res) => {
    res.writeHead(503, { 'content-type': 'text/event-stream' });
    res.end(sseEvent('result', { ok: true }));
  });
  t.like((await run(busy)).outcome, { state: 'failed', reason: 'service_busy' });
});

test('SPEC §3.1 / issue 21: aborting mid-stream (a stop, a cancel) closes the connection and the service sees its request aborted', async (t) => {
  let aborted: Promise<void> | undefined;
  const { svc, url } = await streaming(t, {
    progress: 5,
    delayMs: 10,
    hangAfter: 2,
    onRequest: (info) => {
      aborted = info.aborted;
    },
  });
  const stop = new AbortController();
  const { outcome, previews } = await run(url, {
    signal: stop.signal,
    onProgress: (p) => {
      if (p.text === 'step 2') stop.abort(new Error('the caller canceled the task'));
    },
  });
  t.like(outcome, { state: 'failed', reason: 'outcome_unknown', detail: 'connection_lost' });
  t.is(detail(outcome), 'the caller canceled the task', "the operator's log says why");
  t.deepEqual(previews, [{ text: 'step 1' }, { text: 'step 2' }]);
  await aborted;
  t.is(svc.aborted, 1);
});

test('SPEC §3.1 / issue 21: the time limit covers the whole stream, however much progress it makes', async (t) => {
  let aborted: Promise<void> | undefined;
  const { svc, url } = await streaming(t, {
    progress: 1000,
    delayMs: 20,
    onRequest: (info) => {
      aborted = info.aborted;
    },
  });
  // The stream would go on for 20 s (1000 × 20 ms); a limit of 1 s must end it far sooner. Bounds wide
  // enough for a loaded machine: ended before half the stream, and progress seen before the end.
  const started = Date.now();
  const { outcome, previews } = await run(url, { timeoutMs: 1000 });
  t.like(outcome, { state: 'failed', reason: 'outcome_unknown', detail: 'timeout' });
  t.true(Date.now() - started < 10_000, 'ended at the limit, not at the end of the stream');
  t.true(previews.length > 3, 'progress kept coming until the limit');
  await aborted;
  t.is(svc.aborted, 1);
});
