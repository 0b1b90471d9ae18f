// Issue 22 §1 (metrics): the node's GET /metrics on its control socket and the hub's GET /metrics,
// scraped before and after a card fetch, a free call, a paid call and a refused call between real
// daemons through a real hub: the counters moved, and no label value anywhere is an AID or a task id.
// Also `anet daemon --metrics`: served on loopback, refused on any other address.
import test from 'ava';
import { request } from 'node:http';
import { join } from 'node:path';
import { runCli } from './helpers/cli.js';
import { market } from './helpers/payments.js';
import { startNet } from './helpers/net.js';
import { startDaemon } from '../src/daemon/daemon.js';
import { controlPath } from '../src/node/open.js';

/** One scrape: each sample `name{labels}` → value, and the raw text. */
interface Scrape {
  text: string;
  value(name: string, labels?: Record<string, string>): number;
  labelValues(): string[];
}

function parse(text: string): Scrape {
  const samples = new Map<string, number>();
  const labelValues: string[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels = [...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map(([, k, v]) => [k!, v!] as const);
    labelValues.push(...labels.map(([, v]) => v));
    samples.set(key(m[1]!, Object.fromEntries(labels)), Number(m[3]));
  }
  return {
    text,
    value: (name, labels = {}) => samples.get(key(name, labels)) ?? 0,
    labelValues: () => labelValues,
  };
}

const key = (name: string, labels: Record<string, string>) =>
  `${name}{${Object.entries(labels)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}=${v}`)
    .join(',')}}`;

/** GET /metrics on a daemon's control socket (a unix socket: what a local Prometheus agent or curl reads). */
function scrapeNode(dataDir: string): Promise<Scrape> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: controlPath(dataDir), path: '/metrics', method: 'GET' }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (text += c));
      res.on('end', () =>
        res.statusCode === 200 && /^text\/plain/.test(String(res.headers['content-type']))
          ? resolve(parse(text))
          : reject(new Error(`${res.statusCode}: ${text}`)),
      );
    });
    req.on('error', reject);
    req.end();
  });
}

async function scrapeUrl(url: string): Promise<Scrape> {
  const res = await fetch(url);
  if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
  return parse(await res.text());
}

test('issue 22 §1 (acceptance): node and hub /metrics after a card fetch, a free, a paid and a refused call: the counters moved; no label is an AID or a task id', async (t) => {
  const { net, p, c } = await market(t, [{ id: 'text.translate', price: 3 }, { id: 'text.free' }], { credits: '100' });
  const hubMetrics = `${net.hub.url}/metrics`;
  const before = { p: await scrapeNode(p.dir), c: await scrapeNode(c.dir), hub: await scrapeUrl(hubMetrics) };

  const card = await runCli(['card', p.aid, '--data', c.dir]);
  t.is(card.code, 0, card.stderr);
  const call = async (cap: string) =>
    JSON.parse((await runCli(['call', p.aid, cap, '--args', '{"a":1}', '--json', '--data', c.dir])).stdout);
  const free = await call('text.free');
  t.is(free.state, 'completed');
  const paid = await call('text.translate');
  t.is(paid.state, 'completed');
  // A capability the provider does not offer: refused, and counted under "unknown", not under the caller's words.
  const refused = await call('made.up.by.caller');
  t.is(refused.state, 'rejected');

  const after = { p: await scrapeNode(p.dir), c: await scrapeNode(c.dir), hub: await scrapeUrl(hubMetrics) };
  const moved = (who: 'p' | 'c' | 'hub', name: string, labels?: Record<string, string>) =>
    after[who].value(name, labels) - before[who].value(name, labels);

  // The provider: admissions per capability, durations, nothing left in flight, the refusal by reason.
  t.is(moved('p', 'anet_calls_admitted_total', { capability: 'text.free' }), 1);
  t.is(moved('p', 'anet_calls_admitted_total', { capability: 'text.translate' }), 1);
  t.is(moved('p', 'anet_call_duration_seconds_count', { capability: 'text.free' }), 1);
  t.is(moved('p', 'anet_call_duration_seconds_count', { capability: 'text.translate' }), 1);
  t.is(after.p.value('anet_calls_in_flight', { capability: 'text.free' }), 0);
  t.is(moved('p', 'anet_calls_ended_total', { capability: 'text.free', outcome: 'completed' }), 1);
  t.is(moved('p', 'anet_calls_ended_total', { capability: 'text.translate', outcome: 'completed' }), 1);
  t.is(moved('p', 'anet_calls_refused_total', { capability: 'unknown', reason: refused.reason }), 1, refused.reason);
  t.false(after.p.text.includes('made.up.by.caller'), "a caller's capability id never becomes a label");
  t.true(moved('p', 'anet_relay_messages_total', { direction: 'in' }) >= 3, 'three calls and a payment came in');
  t.true(moved('p', 'anet_relay_messages_total', { direction: 'out' }) >= 3, 'their answers went out');
  t.true(moved('p', 'anet_journal_batch_entries_count') > 0);
  t.true(moved('p', 'anet_journal_append_seconds_count') > 0);
  t.true(after.p.value('anet_actors_live') > 0);
  t.true(after.p.value('nodejs_eventloop_lag_seconds') >= 0 && after.p.text.includes('nodejs_eventloop_lag_seconds'));
  t.true(after.p.text.includes('process_cpu_user_seconds_total'), 'the default process metrics');
  // The caller: its card read, by outcome.
  t.is(moved('c', 'anet_card_fetches_total', { outcome: 'ok' }), 1);
  // The hub: card fetches, envelopes in and out, the paid call's hold and capture.
  t.true(moved('hub', 'anet_hub_card_fetches_total', { outcome: 'ok' }) >= 1);
  t.true(moved('hub', 'anet_hub_relay_messages_total', { direction: 'in' }) >= 6);
  t.true(moved('hub', 'anet_hub_relay_messages_total', { direction: 'out' }) >= 6);
  t.is(moved('hub', 'anet_hub_ledger_operations_total', { kind: 'hold', outcome: 'ok' }), 1);
  t.is(moved('hub', 'anet_hub_ledger_operations_total', { kind: 'capture', outcome: 'ok' }), 1);
  t.true(after.hub.text.includes('anet_hub_mailbox_envelopes'));

  // Nothing in any scrape names who talked to whom, or which task.
  const tasks = [free.task, paid.task, refused.task] as string[];
  for (const [who, s] of Object.entries(after)) {
    for (const v of s.labelValues()) {
      t.false(/^bafyrei/.test(v), `${who}: label value ${v} is an AID`);
      t.false(tasks.includes(v), `${who}: label value ${v} is a task id`);
    }
    t.false(/bafyrei[a-z2-7]{20}/.test(s.text), `${who}: no AID anywhere in the scrape`);
    for (const task of tasks) t.false(s.text.includes(task), `${who}: no task id anywhere in the scrape`);
    t.false(s.text.includes('"a":1'), `${who}: no payload`);
  }
});

test('issue 22 §1: `anet daemon --metrics` serves GET /metrics on a loopback address, and refuses any other in one line naming the fix', async (t) => {
  const net = await startNet(t);
  const n = await net.node('n');
  const daemon = await startDaemon(n.dir, () => {}, { clock: net.clock, metrics: '127.0.0.1:0' });
  t.teardown(() => daemon.close());
  await daemon.published;
  t.regex(daemon.metricsUrl ?? '', /^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
  const scrape = await scrapeUrl(daemon.metricsUrl!);
  t.true(scrape.text.includes('anet_calls_admitted_total'));
  t.is((await fetch(daemon.metricsUrl!.replace('/metrics', '/status'))).status, 404, 'the metrics and nothing else');
  // The control socket still serves the table of operations beside GET /metrics.
  const id = await runCli(['status', '--json', '--data', n.dir]);
  t.is(id.code, 0, id.stderr);

  for (const address of ['0.0.0.0:9464', '10.1.2.3:9464', '[::]:9464', 'example.com:9464', '9464', '127.0.0.1:99999']) {
    const r = await runCli(['daemon', '--metrics', address, '--data', join(net.root, 'never-started')]);
    t.is(r.code, 2, address);
    t.is(r.stderr.split('\n').length, 1, 'one line');
    t.regex(r.stderr, /--metrics takes a loopback address .*reverse proxy or an SSH tunnel/, address);
  }
  await t.throwsAsync(
    startDaemon(n.dir, () => {}, { metrics: '192.168.1.1:9464' }),
    { message: /loopback/ },
  );
});
