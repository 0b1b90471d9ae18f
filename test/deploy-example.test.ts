// deploy/examples/service-files (SPEC §2, §3, §9): the example adapter and config run as documented —
// the adapter on a Unix socket with a bearer token, the node's config from the example file — and a call
// from another node gets the adapter's answer, or its own words when it refuses.
import test from 'ava';
import { spawn } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import stripJsonComments from 'strip-json-comments';
import { startNet } from './helpers/net.js';
import { runCli } from './helpers/cli.js';

const EXAMPLE = fileURLToPath(new URL('../deploy/examples/service-files/', import.meta.url));

test('SPEC §2, §3, §9 (deploy example): the adapter and config.json serve text.wordcount to another node, and doctor is clean', async (t) => {
  const net = await startNet(t);
  const run = join(net.root, 'run');
  await mkdir(run, { mode: 0o700 });
  const socket = join(run, 'anet', 'wordcount.sock');
  const tokenFile = join(net.root, 'wordcount.token');
  await writeFile(tokenFile, 'an-example-token-of-24-bytes\n', { mode: 0o600 });
  const adapter = spawn(process.execPath, [join(EXAMPLE, 'adapter.mjs')], { env: { ...process.env, ANET_SOCKET: socket, ANET_TOKEN_FILE: tokenFile }, stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => void adapter.kill());
  await new Promise<void>((resolve) => adapter.stdout!.on('data', (d) => String(d).includes('listening') && resolve()));

  const config = JSON.parse(stripJsonComments(await readFile(join(EXAMPLE, 'config.json'), 'utf8')));
  const cap = config.modules.service.capabilities[0];
  cap.url = `unix://${socket}`;
  cap.token_file = tokenFile;
  const p = await net.node('provider', { inbound: config.inbound, modules: config.modules });
  const doctor = await runCli(['doctor', '--data', p.dir]);
  t.is(doctor.code, 0, doctor.stdout + doctor.stderr);
  const c = await net.node('caller');
  await net.start(p.dir);
  await net.start(c.dir);

  const ok = await runCli(['call', p.aid, 'text.wordcount', '--args', '{"text": "the quick brown fox"}', '--json', '--data', c.dir]);
  t.is(ok.code, 0, ok.stderr);
  t.like(JSON.parse(ok.stdout), { state: 'completed', result: { words: 4, chars: 19 } });
  const refused = await runCli(['call', p.aid, 'text.wordcount', '--args', '{"text": 5}', '--data', c.dir]);
  t.is(refused.code, 1);
  t.regex(refused.stdout, /^rejected: service_rejected: args.text must be a string/);
});

test('SPEC §10: a priced capability is never run for free: a caller without credits is quoted, its hold refused, the service never called', async (t) => {
  const net = await startNet(t);
  let ran = false;
  const run = join(net.root, 'run');
  await mkdir(run, { mode: 0o700 });
  const { startSampleService } = await import('../src/service/sample.js');
  const service = await startSampleService(join(run, 's.sock'), () => ((ran = true), {}));
  t.teardown(() => service.close());
  const p = await net.node('p', {
    inbound: { public_capabilities: [{ id: 'paid.thing' }] },
    modules: { service: { capabilities: [{ id: 'paid.thing', url: `unix://${service.socketPath}`, price: 5 }] } },
  });
  const c = await net.node('c');
  await net.start(p.dir);
  await net.start(c.dir);
  const r = JSON.parse((await runCli(['call', p.aid, 'paid.thing', '--args', '{}', '--json', '--data', c.dir])).stdout);
  t.like(r, { state: 'failed', reason: 'settlement_failed', detail: 'the hub refused: INSUFFICIENT_FUNDS', payment: { quote: { amount: '5' }, status: 'payment-failed' } });
  t.false(ran);
});
