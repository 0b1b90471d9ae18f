// SPEC §11: the node's hub client against a hub that resets a connection under a request (a kept-alive
// connection closed by the hub as the request went out): it asks once more, on a new connection, signed
// afresh; a hub that resets every time is reported unreachable in one line.
import test from 'ava';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { tempDir } from '../helpers/tmp.js';
import { HubClient, HubUnreachableError } from '../../src/hub-client/client.js';
import { createIdentity } from '../../src/identity/store.js';

/** A server that resets the first `resets` requests' connections, then answers /health; the nonces it saw. */
async function resettingHub(t: import('ava').ExecutionContext, resets: number) {
  const nonces: string[] = [];
  const server = createServer((req, res) => {
    nonces.push(String(req.headers['x-anet-nonce'] ?? ''));
    if (nonces.length <= resets) return void req.socket.destroy();
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: true, aid: 'hub', relay: {} }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, nonces };
}

test('SPEC §11: a request whose connection the hub resets is sent once more, signed with a new nonce', async (t) => {
  const hub = await resettingHub(t, 1);
  const id = await createIdentity(join(await tempDir(t), 'n'), Date.now());
  const client = new HubClient(hub.url, id);
  t.like(await client.account(id.aid), { ok: true });
  t.is(hub.nonces.length, 2);
  t.not(hub.nonces[0], hub.nonces[1], 'the second attempt is signed afresh');
});

test('SPEC §11: a hub that resets again is unreachable, in one line, after one more try', async (t) => {
  const hub = await resettingHub(t, 10);
  const err = await t.throwsAsync(new HubClient(hub.url).health(), { instanceOf: HubUnreachableError });
  t.is(hub.nonces.length, 2);
  t.false(err!.message.includes('\n'));
});
