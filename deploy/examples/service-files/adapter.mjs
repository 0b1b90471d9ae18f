#!/usr/bin/env node
// A small service adapter for ANet (SPEC §3): listens on a Unix socket and answers the node's POSTs.
// It serves `text.wordcount`: the argument object {"text": "..."} becomes {"words": N, "chars": N}.
// Node's standard library only; run it as the same user as `anet daemon`.
//
//   ANET_SOCKET=/run/user/1000/anet/wordcount.sock ANET_TOKEN_FILE=~/.anet/wordcount.token node adapter.mjs
import { createServer } from 'node:http';
import { readFileSync, unlinkSync, chmodSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';

const socket = process.env.ANET_SOCKET ?? `/run/user/${process.getuid()}/anet/wordcount.sock`;
const tokenFile = process.env.ANET_TOKEN_FILE;
// The node sends `Authorization: Bearer <token>` when config.json names a token_file: check it.
const token = tokenFile ? readFileSync(tokenFile, 'utf8').replace(/\r?\n$/, '') : null;
const MAX_BODY = 64 * 1024;

function reply(res, status, body, headers = {}) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

const server = createServer((req, res) => {
  if (token && req.headers.authorization !== `Bearer ${token}`) return reply(res, 401, { error: 'bad or missing bearer token' });
  if (req.method !== 'POST') return reply(res, 405, { error: 'POST only' });
  const chunks = [];
  let size = 0;
  req.on('data', (c) => {
    size += c.length;
    if (size > MAX_BODY) {
      reply(res, 413, { error: `arguments over ${MAX_BODY} bytes` });
      req.destroy();
    } else chunks.push(c);
  });
  req.on('end', () => {
    let args;
    try {
      args = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      return reply(res, 400, { error: 'the body is not JSON' });
    }
    // A 4xx with {"error": "..."} reaches the caller as `rejected`, `service_rejected`, with these words.
    if (typeof args.text !== 'string') return reply(res, 422, { error: 'args.text must be a string' });
    const caller = req.headers['x-anet-caller'];
    console.log(`call ${req.headers['x-anet-call']} from ${caller}: ${args.text.length} chars`);
    reply(res, 200, { words: args.text.split(/\s+/).filter(Boolean).length, chars: [...args.text].length });
  });
});

// The directory must be ours and not writable by others (SPEC §3.2), or the node refuses the socket.
mkdirSync(dirname(socket), { recursive: true, mode: 0o700 });
try {
  unlinkSync(socket);
} catch {
  // no stale socket
}
server.listen(socket, () => {
  chmodSync(socket, 0o600);
  console.log(`text.wordcount listening on ${socket}`);
});
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => server.close(() => process.exit(0)));
