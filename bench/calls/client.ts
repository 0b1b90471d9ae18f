// bench/calls' baseline clients, each in a process of its own: `client.js post SOCKET` POSTs to the echo
// service, `client.js a2a BASE_URL` calls it through the A2A SDK's client (JSON-RPC over Node's fetch,
// kept-alive connections, from the served card). Apart from the caller node's process so that neither
// client's garbage, JIT or timers are charged to anet's caller, nor anet's to them.
// Prints `ready` once its first call gave the arguments back. Then, for each line `{"n":…,"atOnce":…}` on
// stdin, makes n calls with atOnce running at a time and prints `{"perSec":…,"latencies":[…]}`.
import { randomUUID } from 'node:crypto';
import { request } from 'node:http';
import { createInterface } from 'node:readline';
import { isDeepStrictEqual } from 'node:util';
import { SendMessageRequest, TaskState, type Task } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { ECHO_ARGS, runCalls } from './measure.js';

/** One POST; the answer's body, as read. */
function directPost(socketPath: string, body: Buffer): Promise<Buffer[]> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        socketPath,
        path: '/',
        method: 'POST',
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': body.length },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve(chunks));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function a2aCaller(base: string): Promise<() => Promise<unknown>> {
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new JsonRpcTransportFactory()] }),
  );
  const client = await factory.createFromUrl(base);
  return async () => {
    const sent = SendMessageRequest.fromJSON({ message: { messageId: randomUUID(), role: 'ROLE_USER', parts: [{ data: ECHO_ARGS }] } });
    const task = (await client.sendMessage(sent)) as Task;
    if (task.status?.state !== TaskState.TASK_STATE_COMPLETED) throw new Error(`an A2A call ended ${JSON.stringify(task.status)}`);
    return task.artifacts[0]?.parts[0]?.content;
  };
}

/** One call, and the check of the first one's answer (the echo of the arguments). */
async function caller(kind: string, target: string): Promise<() => Promise<unknown>> {
  if (kind === 'post') {
    const body = Buffer.from(JSON.stringify(ECHO_ARGS));
    const one = () => directPost(target, body);
    const answer = JSON.parse(Buffer.concat(await one()).toString());
    if (!isDeepStrictEqual(answer, { echo: ECHO_ARGS })) throw new Error(`the echo service gave ${JSON.stringify(answer)}`);
    return one;
  }
  if (kind === 'a2a') {
    const one = await a2aCaller(target);
    const content = (await one()) as { value?: unknown } | undefined;
    if (!isDeepStrictEqual(content?.value, { echo: ECHO_ARGS })) throw new Error(`the A2A echo gave ${JSON.stringify(content)}`);
    return one;
  }
  throw new Error('usage: client.js post SOCKET | client.js a2a BASE_URL');
}

const one = await caller(process.argv[2] ?? '', process.argv[3] ?? '');
console.log('ready');
for await (const line of createInterface({ input: process.stdin })) {
  const { n, atOnce } = JSON.parse(line) as { n: number; atOnce: number };
  console.log(JSON.stringify(await runCalls(n, atOnce, one)));
}
