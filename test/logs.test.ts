// Issue 22 §2 (structured logs): the hub's log at info, after registrations, card fetches, calls and a
// payment, names no node's AID (at debug it does: the same lines, unmasked); `anet daemon` logs one JSON
// line per event on stderr when it is not a terminal (level, time, msg), with no a2a token and no key
// material; levels from --log-level or ANET_LOG_LEVEL; readable lines on a terminal.
import test from 'ava';
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { BIN, runCli } from './helpers/cli.js';
import { providerConfig, startNet } from './helpers/net.js';
import { mint, pricedProvider } from './helpers/payments.js';
import { hubLog, startHub } from '../src/hub/main.js';
import { identityPaths } from '../src/identity/store.js';
import { decodeCanonical } from '../src/identity/cbor.js';
import { createLogger, logLevel, logTo } from '../src/util/log.js';

const AID = /bafyrei[a-z2-7]{20,}/;

/** A hub logging at `level` through `anet hub start`'s own log (hubLog), two nodes, a card, a free and a paid call. */
async function busyHub(t: import('ava').ExecutionContext, level: string) {
  const lines: string[] = [];
  const log = hubLog({ out: () => {}, err: (l) => lines.push(l) }, level);
  const net = await startNet(t, { hub: (dataDir, now) => startHub({ dataDir, port: 0, now, log }) });
  const p = await pricedProvider(t, net, [{ id: 'text.translate', price: 3 }, { id: 'text.free' }]);
  const c = await net.node('c');
  await net.start(p.dir);
  await net.start(c.dir);
  await mint(net, c.aid, '100');
  t.is((await runCli(['card', p.aid, '--data', c.dir])).code, 0);
  for (const cap of ['text.free', 'text.translate']) {
    const r = JSON.parse((await runCli(['call', p.aid, cap, '--args', '{}', '--json', '--data', c.dir])).stdout);
    t.is(r.state, 'completed');
  }
  return { lines, aids: [p.aid, c.aid, net.hub.aid] };
}

test('issue 22 §2: the hub log at info after registrations, cards, calls and a payment names no AID (who talked to whom cannot be rebuilt from it)', async (t) => {
  const { lines, aids } = await busyHub(t, 'info');
  t.true(lines.length >= 2, 'the registrations were logged');
  for (const line of lines) {
    const e = JSON.parse(line);
    t.true(['info', 'warn', 'error'].includes(e.level), line);
    t.false(AID.test(line), `an AID in: ${line}`);
    for (const aid of aids) t.false(line.includes(aid.slice(7, 27)), `part of an AID in: ${line}`);
  }
});

test('issue 22 §2: at debug the hub log does name AIDs (so the info test above has something to catch)', async (t) => {
  const { lines, aids } = await busyHub(t, 'debug');
  const debug = lines.map((l) => JSON.parse(l)).filter((e) => e.level === 'debug');
  t.true(
    debug.some((e) => e.msg.includes(aids[0]!)),
    lines.join('\n'),
  );
});

test('issue 22 §2: anet daemon logs JSON lines (level, time, msg) on stderr when it is no terminal, without the a2a token or key material', async (t) => {
  const net = await startNet(t);
  const n = await net.node('n', { ...providerConfig([{ id: 'text.echo' }]), local: { a2a: '127.0.0.1:0' } });
  const child = spawn(process.execPath, [BIN, 'daemon', '--data', n.dir], {
    env: { ...process.env, ANET_LOG_LEVEL: 'debug' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.teardown(() => void child.kill('SIGKILL'));
  let stderr = '';
  let stdout = '';
  child.stdout.on('data', (d) => (stdout += d));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no relay stream:\n${stdout}\n${stderr}`)), 20_000);
    child.stderr.on('data', (d) => {
      stderr += d;
      if (stderr.includes('relay stream open')) {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  child.kill('SIGTERM');
  await exited;
  t.regex(stdout, /^anet daemon: ready; /m, 'the command output stays on stdout');
  t.regex(stdout, /^anet daemon: stopped$/m);
  const events = stderr.trimEnd().split('\n');
  t.true(events.length >= 2, stderr);
  for (const line of events) {
    const e = JSON.parse(line);
    t.true(['debug', 'info', 'warn', 'error'].includes(e.level), line);
    t.false(Number.isNaN(Date.parse(e.time)), line);
    t.is(typeof e.msg, 'string', line);
    t.is(e.name, 'anet daemon');
  }
  t.true(
    events.some((l) => JSON.parse(l).msg.startsWith('card seq')),
    stderr,
  );
  t.true(
    events.some((l) => JSON.parse(l).msg.startsWith('local A2A endpoint http')),
    stderr,
  );
  // Neither the bearer token nor the seeds, in any spelling.
  const token = (await readFile(join(n.dir, 'a2a.token'), 'utf8')).trim();
  t.true(token.length >= 32);
  t.false(stderr.includes(token) || stdout.includes(token), 'the a2a token');
  const keys = decodeCanonical(await readFile(identityPaths(n.dir).store)) as Map<number, Uint8Array>;
  for (const seed of [keys.get(1)!, keys.get(2)!]) {
    for (const spelled of [
      Buffer.from(seed).toString('hex'),
      Buffer.from(seed).toString('base64'),
      Buffer.from(seed).toString('base64url'),
    ])
      t.false(stderr.includes(spelled) || stdout.includes(spelled), 'a seed');
  }
});

test('issue 22 §2: levels: --log-level and ANET_LOG_LEVEL are checked; warn keeps info out; a terminal gets readable lines', async (t) => {
  const bad = await runCli(['daemon', '--log-level', 'loud', '--data', '/nonexistent']);
  t.is(bad.code, 2);
  t.regex(bad.stderr, /--log-level takes one of debug, info, warn, error, not "loud"/);
  const hubBad = await runCli(['hub', 'start', '--log-level', 'verbose', '--data', '/nonexistent']);
  t.is(hubBad.code, 2);
  t.regex(hubBad.stderr, /--log-level takes one of/);

  t.regex(String(logLevel(undefined, 'loud')), /^ANET_LOG_LEVEL takes one of/);
  t.is(logLevel(undefined, 'warn'), 'warn');
  t.is(logLevel('error', 'warn'), 'error', 'the flag wins over the environment');
  // The hub masks any AID in a line above debug, whoever wrote the line.
  const hubLines: string[] = [];
  const hub = hubLog({ out: () => {}, err: (l) => hubLines.push(l) }, 'debug');
  const aid = 'bafyreibpd4h3cs5sxw7irvzm3sjjvzw2up3oemv3q6uwspzvgzedpi56iq';
  hub(`GET /agents/${aid}/card: INTERNAL: boom`, 'error');
  hub(`registered ${aid}`, 'debug');
  t.deepEqual(
    hubLines.map((l) => JSON.parse(l).msg),
    ['GET /agents/bafyrei…/card: INTERNAL: boom', `registered ${aid}`],
  );

  const lines: string[] = [];
  const warnOnly = logTo(createLogger({ name: 'anet daemon', level: 'warn', write: (l) => lines.push(l), readable: false }));
  warnOnly('an info line');
  warnOnly('a warning', 'warn');
  t.deepEqual(
    lines.map((l) => JSON.parse(l).msg),
    ['a warning'],
  );
  const readable: string[] = [];
  const tty = logTo(createLogger({ name: 'anet daemon', level: 'info', write: (l) => readable.push(l), readable: true }));
  tty('card seq 3 published');
  tty('the hub refused an ack', 'warn');
  tty('message handler failed', 'error');
  t.deepEqual(readable, [
    'anet daemon: card seq 3 published',
    'anet daemon: warning: the hub refused an ack',
    'anet daemon: error: message handler failed',
  ]);
});
