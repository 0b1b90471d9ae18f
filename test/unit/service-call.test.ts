// SPEC §3, §3.1, §3.2: the service module against real services on Unix sockets that misbehave on
// purpose — every row of the §3.1 table, the request headers and body, the token, the socket checks.
import test, { type ExecutionContext } from 'ava';
import { createServer as createHttpServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type Socket } from 'node:net';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { tempDir } from '../helpers/tmp.js';
import { until } from '../helpers/wait.js';
import { callService, checkTarget, retryAfter, type ServiceOutcome } from '../../src/service/call.js';
import { parseServiceUrl, type ServiceUrl } from '../../src/service/url.js';
import { streamBody } from '../../src/node/provider/files.js';

async function privateDir(t: ExecutionContext): Promise<string> {
  const root = await tempDir(t);
  const dir = join(root, 'run');
  await mkdir(dir, { mode: 0o700 });
  return dir;
}

async function service(
  t: ExecutionContext,
  handler: (req: IncomingMessage, res: ServerResponse, body: Buffer) => void,
  dir?: string,
): Promise<ServiceUrl> {
  const path = join(dir ?? (await privateDir(t)), 'svc.sock');
  const server = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => handler(req, res, Buffer.concat(chunks)));
  });
  await new Promise<void>((r) => server.listen(path, () => r()));
  t.teardown(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  const url = parseServiceUrl(`unix://${path}:/v1/run`) as ServiceUrl;
  servers.set(url, server);
  return url;
}

const servers = new Map<ServiceUrl, HttpServer>();
const serverOf = (url: ServiceUrl): HttpServer => servers.get(url)!;

/** A raw socket server, for services that break HTTP itself. */
async function rawService(t: ExecutionContext, onConnection: (s: Socket) => void): Promise<ServiceUrl> {
  const path = join(await privateDir(t), 'raw.sock');
  const sockets: Socket[] = [];
  const server = createNetServer((s) => {
    sockets.push(s);
    onConnection(s);
  });
  await new Promise<void>((r) => server.listen(path, () => r()));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return parseServiceUrl(`unix://${path}`) as ServiceUrl;
}

const call = { caller: 'bafyreicaller', callId: 'call-1', capability: 'text.echo', body: Buffer.from('{"text":"hi"}') };
const run = (url: ServiceUrl, timeoutMs = 2000, tokenFile?: string): Promise<ServiceOutcome> =>
  callService({ url, timeoutMs, ...(tokenFile ? { tokenFile } : {}) }, call);
const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
};

test('SPEC §3: the request carries the headers, the bearer token and the argument object; a 2xx object completes', async (t) => {
  let seen: { method?: string; url?: string; headers?: IncomingMessage['headers']; body?: string } = {};
  const url = await service(t, (req, res, body) => {
    seen = { method: req.method, url: req.url, headers: req.headers, body: body.toString() };
    json(res, 200, { echoed: JSON.parse(body.toString()) });
  });
  const dir = await privateDir(t);
  const token = join(dir, 'token');
  await writeFile(token, 'a-token-of-more-than-16-bytes\n', { mode: 0o600 });
  t.deepEqual(await run(url, 2000, token), { state: 'completed', result: { echoed: { text: 'hi' } }, text: '{"echoed":{"text":"hi"}}' });
  t.like(seen, { method: 'POST', url: '/v1/run', body: '{"text":"hi"}' });
  t.like(seen.headers, {
    'content-type': 'application/json',
    authorization: 'Bearer a-token-of-more-than-16-bytes',
    'x-anet-caller': 'bafyreicaller',
    'x-anet-call': 'call-1',
    'x-anet-capability': 'text.echo',
  });
  await chmod(token, 0o644);
  t.like(await run(url, 2000, token), { state: 'failed', reason: 'service_unavailable' }, 'a token readable by others is never sent');
});

test('SPEC §3.1 row 1: no socket, or a file that is not a socket: service_unavailable, nothing sent', async (t) => {
  const dir = await privateDir(t);
  t.like(await run(parseServiceUrl(`unix://${join(dir, 'none.sock')}`) as ServiceUrl), { state: 'failed', reason: 'service_unavailable' });
  const path = join(dir, 'file.sock');
  await writeFile(path, ''); // a regular file where the socket should be
  t.like(await run(parseServiceUrl(`unix://${path}`) as ServiceUrl), { state: 'failed', reason: 'service_unavailable' });
});

test('SPEC §3.2: a socket in a directory other users can write is refused before anything is sent, and the reply names no path', async (t) => {
  const root = await tempDir(t);
  const open = join(root, 'open');
  await mkdir(open);
  await chmod(open, 0o777);
  let reached = false;
  const url = await service(
    t,
    (_req, res) => {
      reached = true;
      json(res, 200, {});
    },
    open,
  );
  const outcome = await run(url);
  t.like(outcome, { state: 'failed', reason: 'service_unavailable' });
  t.false(reached, 'nothing was sent');
  const { operatorDetail: _local, ...forCaller } = outcome as { operatorDetail?: string };
  t.false(JSON.stringify(forCaller).includes(root), 'what the caller sees names no local path');
});

test('SPEC §3.2: calls admitted in one turn share one socket check; a directory opened to other users is refused from the next turn on', async (t) => {
  const dir = await privateDir(t);
  const url = await service(t, (_req, res) => json(res, 200, {}), dir);
  const target = { url, timeoutMs: 2000 };
  t.is(checkTarget(target), checkTarget(target), 'one check for the calls of this turn');
  t.is(await checkTarget(target), null);
  await chmod(dir, 0o777);
  await new Promise((resolve) => setImmediate(resolve));
  const fault = await checkTarget(target);
  t.truthy(fault, 'seen at the first call of the next turn');
  t.like(await run(url), { state: 'failed', reason: 'service_unavailable' });
});

test('SPEC §3.1 row 2: 429 and 503 are service_busy, with retry_after_ms from Retry-After', async (t) => {
  let status = 503;
  let header: Record<string, string> = { 'retry-after': '7' };
  const url = await service(t, (_req, res) => json(res, status, { error: 'busy' }, header));
  t.deepEqual(await run(url).then(({ operatorDetail: _o, ...o }: any) => o), {
    state: 'failed',
    reason: 'service_busy',
    retryAfterMs: 7000,
  });
  status = 429;
  header = {};
  t.like(await run(url), { state: 'failed', reason: 'service_busy', retryAfterMs: undefined });
  t.is(retryAfter(new Date(Date.UTC(2030, 0, 1, 0, 0, 10)).toUTCString(), Date.UTC(2030, 0, 1, 0, 0, 0)), 10_000);
});

test("SPEC §3.1 row 3: another 4xx is rejected with the service's own words (first 200 chars), or the status line", async (t) => {
  let body: unknown = { error: `bad language code ${'x'.repeat(300)}` };
  const url = await service(t, (_req, res) => json(res, 422, body));
  const r = (await run(url)) as { state: string; reason: string; message: string };
  t.like(r, { state: 'rejected', reason: 'service_rejected' });
  t.is(r.message, `bad language code ${'x'.repeat(300)}`.slice(0, 200));
  body = 'not json';
  t.like(await run(url), { state: 'rejected', reason: 'service_rejected', message: '422 Unprocessable Entity' });
});

test('SPEC §3.1 row 4: 500, 501, a non-object 2xx and a 2 MiB answer are service_error', async (t) => {
  let reply: (res: ServerResponse) => void = (res) => json(res, 500, { error: 'boom' });
  const url = await service(t, (_req, res) => reply(res));
  t.like(await run(url), { state: 'failed', reason: 'service_error' });
  reply = (res) => json(res, 501, {});
  t.like(await run(url), { state: 'failed', reason: 'service_error' });
  reply = (res) => json(res, 200, [1, 2, 3]);
  t.like(await run(url), { state: 'failed', reason: 'service_error' });
  reply = (res) => json(res, 200, 'plain text');
  t.like(await run(url), { state: 'failed', reason: 'service_error' });
  reply = (res) => json(res, 200, { big: 'x'.repeat(2 * 1024 * 1024) });
  t.like(await run(url), { state: 'failed', reason: 'service_error' });
  reply = (res) => json(res, 200, { fits: 'x'.repeat(1024 * 1024 - 20) });
  t.like(await run(url), { state: 'completed' }, 'an object just under 1 MiB is fine');
});

test('SPEC §3.1 row 5: a hang past the time limit, a dropped connection, 502, 504 and a broken-off body are outcome_unknown', async (t) => {
  const hang = await rawService(t, () => {});
  t.like(await run(hang, 300), { state: 'failed', reason: 'outcome_unknown', detail: 'timeout' });
  const drop = await rawService(t, (s) => s.once('data', () => s.destroy()));
  t.like(await run(drop), { state: 'failed', reason: 'outcome_unknown', detail: 'connection_lost' });
  const brokenOff = await rawService(t, (s) =>
    s.once('data', () => {
      // Dropped once the head and part of the body have been handed to the network: they arrive first.
      s.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"partial":', () => s.destroy());
    }),
  );
  t.like(await run(brokenOff), { state: 'failed', reason: 'outcome_unknown', detail: 'connection_lost' });
  let status = 502;
  const gateway = await service(t, (_req, res) => json(res, status, {}));
  t.like(await run(gateway), { state: 'failed', reason: 'outcome_unknown' });
  status = 504;
  t.like(await run(gateway), { state: 'failed', reason: 'outcome_unknown' });
});

test('SPEC §3, §3.1: a connection is kept for the next call; one dropped after a kept call was sent is outcome_unknown, and a service that closes each connection still serves every call', async (t) => {
  // One connection for three calls in a row: the service sees one `connection` event.
  let connections = 0;
  let calls = 0;
  const url = await service(t, (_req, res) => {
    calls++;
    json(res, 200, { n: calls });
  });
  const server = serverOf(url);
  server.on('connection', () => connections++);
  for (let i = 1; i <= 3; i++) t.like(await run(url), { state: 'completed', result: { n: i } });
  t.is(connections, 1, 'the three calls shared one connection');

  // The service drops a kept connection once it has the second call on it: the call may have run.
  let seen = 0;
  let dropperConnections = 0;
  const dropper = await rawService(t, (s) => {
    dropperConnections++;
    s.on('data', () => {
      seen++;
      if (seen === 1) s.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}');
      else s.destroy();
    });
  });
  t.like(await run(dropper), { state: 'completed' });
  t.like(await run(dropper), { state: 'failed', reason: 'outcome_unknown', detail: 'connection_lost' });
  t.is(dropperConnections, 1, 'the second call went over the kept connection');

  // `Connection: close` on every answer: each call gets a connection of its own.
  let closing = 0;
  const closer = await service(t, (_req, res) => json(res, 200, { ok: true }, { connection: 'close' }));
  serverOf(closer).on('connection', () => closing++);
  for (let i = 0; i < 3; i++) t.like(await run(closer), { state: 'completed' });
  t.is(closing, 3);
});

test('SPEC §3.1: a service that answers before reading an 8 MiB body gets its connection closed, not kept with the unsent body', async (t) => {
  const size = 8 << 20;
  let received = 0;
  let closed = false;
  let conn: Socket | undefined;
  const early = await rawService(t, (s) => {
    conn = s;
    s.on('data', (d: Buffer) => (received += d.length));
    s.once('data', () => {
      s.write('HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: 23\r\n\r\n{"error":"who are you"}');
      s.pause(); // reads nothing more until the answer is taken
    });
    s.on('close', () => (closed = true));
  });
  const outcome = await callService({ url: early, timeoutMs: 5000 }, { ...call, body: Buffer.alloc(size, 0x20) });
  t.like(outcome, { state: 'rejected', reason: 'service_rejected', message: 'who are you' });
  // Kept, the connection would go on to carry the whole body before it closed; closed, it ends with
  // what the socket buffers held.
  conn!.resume();
  await until(() => closed, 'the connection closing', 250);
  t.true(received < size, `the node stopped sending the body (${received} of ${size} bytes arrived)`);
});

test('SPEC §3: kept connections are never shared between callers', async (t) => {
  let connections = 0;
  const url = await service(t, (req, res) => json(res, 200, { caller: req.headers['x-anet-caller'] }));
  serverOf(url).on('connection', () => connections++);
  for (const caller of ['bafyreione', 'bafyreitwo', 'bafyreione', 'bafyreitwo']) {
    t.like(await callService({ url, timeoutMs: 2000 }, { ...call, caller }), { state: 'completed', result: { caller } });
  }
  t.is(connections, 2, 'one kept connection per caller');
});

test('SPEC §3: a streamed body arrives byte for byte, its Content-Length exact, with arguments and file names that are not ASCII', async (t) => {
  let seen: { length?: string; body?: Buffer } = {};
  const url = await service(t, (req, res, body) => {
    seen = { length: req.headers['content-length'], body };
    json(res, 200, { ok: true });
  });
  const args = { text: 'héllo 日本 💡' };
  const files = [
    { name: 'résumé.png', mime: 'image/png', data_b64: Buffer.from('first file').toString('base64') },
    { name: 'ünï.txt', mime: 'text/plain', data_b64: Buffer.from('second').toString('base64') },
  ];
  const body = streamBody('http://127.0.0.1:1', JSON.stringify(args), files);
  t.like(await callService({ url, timeoutMs: 2000 }, { ...call, body }), { state: 'completed' });
  const expected = Buffer.from(JSON.stringify({ args, files }));
  t.is(seen.length, String(expected.length));
  t.true(seen.body?.equals(expected), `the service got ${seen.body?.toString()}`);
});
