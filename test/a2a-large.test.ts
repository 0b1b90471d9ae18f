// SPEC §12 (local A2A endpoint): large request bodies. A body over 64 KiB is parsed (losslessly) in a worker
// thread, so a 30 MiB request does not hold up the others; a body over the limit (2 × the relay's envelope
// limit, "32 MiB") is answered 413 as soon as that is known. Orderings only, no timings.
import test from 'ava';
import { readFile } from 'node:fs/promises';
import { request, type IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { isLosslessNumber } from 'lossless-json';
import { startNet } from './helpers/net.js';
import { MAX_BODY } from '../src/a2a/server.js';
import { BodyParser, INLINE_MAX, parseInline } from '../src/a2a/parse.js';

/** A daemon with its endpoint on a free loopback port; the JSON-RPC URL of an agent (any AID will do) and the token. */
async function endpoint(t: Parameters<typeof startNet>[0]) {
  const net = await startNet(t);
  const c = await net.node('c', { local: { a2a: '127.0.0.1:0' } });
  const daemon = await net.start(c.dir);
  const token = (await readFile(join(c.dir, 'a2a.token'), 'utf8')).trim();
  return { url: `${daemon.a2a!.agentUrl(c.aid)}jsonrpc`, token };
}

const text = (res: IncomingMessage) =>
  new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', reject);
  });

/** POSTs `body` on a connection of its own; `sent` runs once the whole body is handed to the socket. */
function post(url: string, token: string, body: string | Buffer, sent?: () => void): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        agent: false,
        headers: {
          authorization: `Bearer ${token}`,
          'a2a-version': '1.0',
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        },
      },
      (res) => {
        text(res).then((b) => resolve({ status: res.statusCode!, body: b }), reject);
      },
    );
    req.on('error', reject);
    req.end(body, sent);
  });
}

const GET_TASK = '{"jsonrpc":"2.0","id":"small","method":"GetTask","params":{"id":"00000000000000ff"}}';

test('SPEC §12 (local A2A endpoint): while a 30 MiB SendMessage is being parsed, a small request sent after it is answered first', async (t) => {
  const { url, token } = await endpoint(t);
  // A message with a 30 MiB file, refused (-32602: text beside a data part) as soon as it is parsed, so
  // parsing it is all the work it makes.
  const raw = Buffer.alloc(22 * 1024 * 1024, 7).toString('base64');
  const parts = [{ text: 'see the file' }, { data: { capability: 'demo.echo', args: { n: 1 } } }, { raw, filename: 'big.bin' }];
  const big = JSON.stringify({
    jsonrpc: '2.0',
    id: 'big',
    method: 'SendMessage',
    params: { message: { messageId: 'm', role: 'ROLE_USER', parts } },
  });
  t.true(big.length > 29 * 1024 * 1024 && big.length < MAX_BODY);

  const order: string[] = [];
  let small: Promise<{ status: number; body: string }> | undefined;
  const bigAnswer = post(url, token, big, () => {
    // The big body has all been sent: the endpoint is reading or parsing it now.
    small = post(url, token, GET_TASK).then((r) => {
      order.push('small');
      return r;
    });
  }).then((r) => {
    order.push('big');
    return r;
  });
  const b = await bigAnswer;
  await t.notThrowsAsync(() => small!);
  const s = await small!;
  t.deepEqual(order, ['small', 'big'], 'the small request did not wait for the large one to be parsed');
  t.like(JSON.parse(s.body), { id: 'small', error: { code: -32001 } });
  t.is(b.status, 200);
  t.like(JSON.parse(b.body), { id: 'big', error: { code: -32602 } });
  t.regex(JSON.parse(b.body).error.message, /no text part beside it/);
});

test('SPEC §12 (local A2A endpoint): a body over 32 MiB is answered 413 before the rest of it is read — at once on its Content-Length, or as a chunked body passes the limit — and a client still sending gets the whole answer; a body of exactly the limit is read', async (t) => {
  const { url, token } = await endpoint(t);
  const headers = { authorization: `Bearer ${token}`, 'a2a-version': '1.0', 'content-type': 'application/json' };
  const refusal = { error: `the request body is larger than ${MAX_BODY} bytes` };

  // Content-Length over the limit: answered with none of the body sent.
  await new Promise<void>((resolve, reject) => {
    const req = request(url, { method: 'POST', agent: false, headers: { ...headers, 'content-length': MAX_BODY + 1 } }, (res) => {
      t.is(res.statusCode, 413);
      t.is(res.headers.connection, 'close');
      text(res).then((body) => {
        t.deepEqual(JSON.parse(body), refusal);
        req.destroy();
        resolve();
      }, reject);
    });
    req.on('error', () => {});
    req.flushHeaders();
  });

  // Chunked: answered once the limit is passed, while the client has not ended its body; it sends more, ends,
  // and reads the whole answer (no reset), then the connection closes.
  await new Promise<void>((resolve, reject) => {
    let ended = false;
    const req = request(url, { method: 'POST', agent: false, headers }, (res) => {
      t.false(ended, 'answered before the body ended');
      t.is(res.statusCode, 413);
      req.end(Buffer.alloc(1024 * 1024, 0x20), () => (ended = true));
      text(res).then((body) => t.deepEqual(JSON.parse(body), refusal), reject);
      res.socket.on('close', () => resolve());
    });
    req.on('error', reject);
    req.write(Buffer.alloc(MAX_BODY + 1, 0x20));
  });

  // Exactly the limit (a small request padded with spaces, parsed in a worker): read and answered.
  const padded = GET_TASK + ' '.repeat(MAX_BODY - GET_TASK.length);
  const answer = await post(url, token, padded);
  t.is(answer.status, 200);
  t.like(JSON.parse(answer.body), { id: 'small', error: { code: -32001 } });
});

/** A value as a comparable tree: LosslessNumbers with their digits, objects with their prototype and keys in order. */
function shape(v: unknown): unknown {
  if (isLosslessNumber(v)) return ['number', (v as { value: string }).value];
  if (Array.isArray(v)) return ['array', v.map(shape)];
  if (v !== null && typeof v === 'object')
    return [
      'object',
      Object.getPrototypeOf(v) === Object.prototype,
      Object.keys(v).map((k) => [k, shape((v as Record<string, unknown>)[k])]),
    ];
  return [typeof v, v];
}

test('SPEC §12 (local A2A endpoint): a body over 64 KiB, parsed in a worker thread, reads as the same body parsed in line — numbers digit for digit, keys in order, __proto__ keys, duplicate keys, strings, and the same bodies that are not JSON', async (t) => {
  const parser = new BodyParser();
  t.teardown(() => parser.close());
  const bodies = [
    '{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"SendMessage","params":{"message":{"parts":[{"data":{"capability":"c","args":{"n":12345678901234567890.000001,"z":-0,"e":1E400,"f":1.50,"g":-2.5e-7}}}]}}}',
    '{"__proto__":{"x":1},"a":[1,{"__proto__":2}],"b":{"__proto__":null}}',
    '{"2":"b","1":"a","x":true,"y":false,"z":null,"e":[],"o":{},"s":""}',
    '{"a":{"b":[1,2]},"a":{"b":[1,2]}}',
    '"\\ud800 alone, \\u0000, \\"quoted\\", \\/ and é ☃ 𝄞"',
    '12345678901234567890123',
    '[[[["deep"]]], {"k": [{"k": [{}]}]}]',
    `${'{"a":'.repeat(1000)}1${'}'.repeat(1000)}`,
    `{"raw":"${'QUJD'.repeat(40_000)}","filename":"f.bin"}`,
    // Not JSON:
    '{"a":1,"a":2}',
    '{nope',
    '[1,]',
    '"\\x"',
    '{"a":1} {"b":2}',
    '"raw\ncontrol"',
    '',
  ];
  for (const body of bodies) {
    const inline = parseInline(Buffer.from(body));
    // Trailing spaces change nothing a parser reads, and take the body past INLINE_MAX.
    const padded = Buffer.from(body + ' '.repeat(INLINE_MAX));
    const worker = await parser.parse(padded);
    t.is(worker.ok, inline.ok, body.slice(0, 60));
    if (inline.ok && worker.ok) t.deepEqual(shape(worker.value), shape(inline.value), body.slice(0, 60));
  }
  // Bytes that are not UTF-8 read the same way in both.
  const invalid = Buffer.concat([Buffer.from('{"s":"'), Buffer.from([0xff, 0xc3]), Buffer.from('"}')]);
  const worker = await parser.parse(Buffer.concat([invalid, Buffer.alloc(INLINE_MAX, 0x20)]));
  t.deepEqual(worker.ok && shape(worker.value), shape((parseInline(invalid) as { value: unknown }).value));
});

test('SPEC §12 (local A2A endpoint): through the endpoint, a body padded past 64 KiB gets the answer the body gets — the id echoed digit for digit, the same JSON-RPC errors', async (t) => {
  const { url, token } = await endpoint(t);
  const bodies = [
    '{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"GetTask","params":{"id":"x"}}',
    '{nope',
    '[]',
    '{"jsonrpc":"2.0","method":"GetTask"}',
    '{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}',
    '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}',
    '{"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"data":{"capability":"demo.echo"}},{"url":"https://example.org/x"}]}}}',
  ];
  for (const body of bodies) {
    const small = await post(url, token, body);
    const large = await post(url, token, body + ' '.repeat(INLINE_MAX));
    t.deepEqual(large, small, body);
  }
  t.regex((await post(url, token, bodies[0]! + ' '.repeat(INLINE_MAX))).body, /"id":123456789012345678901234567890,/);
});
