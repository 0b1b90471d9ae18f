// SPEC §5.1 (publish on change at start), §6.4 (`anet find`, `anet card`), §11 (the hub directory), end to
// end: a real hub and two real daemons in temporary directories.
import test, { type ExecutionContext } from 'ava';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { tempDir } from './helpers/tmp.js';
import { runBin } from './helpers/cli.js';
import { startBin } from './helpers/proc.js';

function providerConfig(hub: string, prices: [number, number]) {
  return {
    hub,
    inbound: { policy: 'closed', public_capabilities: [{ id: 'text.summarize' }, { id: 'text.translate' }] },
    modules: {
      service: {
        capabilities: [
          { id: 'text.summarize', url: 'unix:///run/anet-test/summarize.sock', price: prices[0], description: 'Summarise a text.' },
          { id: 'text.translate', url: 'unix:///run/anet-test/translate.sock', price: prices[1], tags: ['translate', 'language'] },
        ],
      },
    },
  };
}

/** A real hub process and two initialised nodes: `a` (to configure) and `b` (pointed at the hub). */
async function hubAndTwoNodes(t: ExecutionContext) {
  const root = await tempDir(t);
  const hub = startBin(t, ['hub', 'start', '--port', '0', '--data', join(root, 'hub')]);
  const hubUrl = /ready on (http:\/\/[0-9.:]+)/.exec(await hub.waitFor(/ready on/))![1]!;
  const a = join(root, 'a');
  const b = join(root, 'b');
  const aid: string = JSON.parse((await runBin(['init', '--data', a, '--json'])).stdout).aid;
  await runBin(['init', '--data', b]);
  await writeFile(join(b, 'config.json'), JSON.stringify({ hub: hubUrl }));
  return { root, hubUrl, a, b, aid };
}

test('SPEC §6.4, §11: find on one daemon lists the other with the right charge for free, some paid, all paid', async (t) => {
  const { hubUrl, a, b, aid } = await hubAndTwoNodes(t);
  const reader = startBin(t, ['daemon', '--data', b]);
  await reader.waitFor(/ready/);

  const cases: [[number, number], string, string][] = [
    [[0, 0], 'free', '1'],
    [[0, 3], 'some skills paid', '2'],
    [[5, 3], 'paid', '3'],
  ];
  for (const [prices, charge, seq] of cases) {
    await writeFile(join(a, 'config.json'), JSON.stringify(providerConfig(hubUrl, prices)));
    const provider = startBin(t, ['daemon', '--data', a]);
    await provider.waitFor(new RegExp(`card seq ${seq} published`));
    await provider.stop();
    const found = await runBin(['find', 'translate', '--data', b]);
    t.is(found.code, 0, found.stderr);
    const [head, row, ...more] = found.stdout.trim().split('\n');
    t.regex(head!, /^name +charge +key +skills +AID$/);
    t.deepEqual(more, []);
    t.regex(
      row!,
      new RegExp(`^anet agent ${aid.slice(0, 12)} +${charge} +confirmed +text\\.summarize, text\\.translate +${aid}$`),
      `prices ${prices}`,
    );
  }
  // The same content at the next start is not re-signed.
  const again = startBin(t, ['daemon', '--data', a]);
  await again.waitFor(/card seq 3 published/);
  await again.stop();

  const json = JSON.parse((await runBin(['find', '--skill', 'text.summarize', '--json', '--data', b])).stdout);
  t.is(json.length, 1);
  t.like(json[0], { aid, charge: 'paid', key: 'confirmed', verified: true });
  t.deepEqual(JSON.parse((await runBin(['find', 'nothing-matches-this', '--json', '--data', b])).stdout), []);
  t.is((await runBin(['find', '--tag', 'language', '--json', '--data', b])).stdout.includes(aid), true);
});

test('SPEC §6.4: anet card on the public-card path, and --json', async (t) => {
  const { root, hubUrl, a, b, aid } = await hubAndTwoNodes(t);
  await writeFile(
    join(a, 'config.json'),
    JSON.stringify({ ...providerConfig(hubUrl, [0, 0]), inbound: { ...providerConfig(hubUrl, [0, 0]).inbound, policy: 'open' } }),
  );
  const reg = await runBin(['hub-register', '--name', 'translator', '--data', a]);
  t.is(reg.code, 0, reg.stderr);
  t.regex(reg.stdout, /card seq 1 published/);

  // No daemon on b: the CLI opens the node itself.
  const card = await runBin(['card', aid, '--data', b]);
  t.is(card.code, 0, card.stderr);
  t.deepEqual(card.stdout.trim().split('\n'), [
    `translator ${aid} (verified, key confirmed) free`,
    'chat',
    'text.summarize',
    'text.translate',
    'The agent declares no payments and has not given you a contact credential, so it was not contacted: this is its public card.',
  ]);
  const data = JSON.parse((await runBin(['card', aid, '--json', '--data', b])).stdout);
  t.deepEqual(Object.keys(data).sort(), [
    'aid',
    'card',
    'charge',
    'explanation',
    'extended',
    'fetchedAt',
    'key',
    'lastAttemptAt',
    'nextAttemptAt',
    'prices',
    'reason',
    'stale',
    'verified',
  ]);
  t.like(data, {
    aid,
    verified: true,
    key: 'confirmed',
    charge: 'free',
    extended: 'not_applicable',
    reason: 'not_applicable',
    prices: null,
  });
  t.is(data.card.name, 'translator');

  const bad = await runBin(['card', 'bafyreinotanaid', '--data', b]);
  t.is(bad.code, 2);
  const stranger = JSON.parse((await runBin(['init', '--data', join(root, 'c'), '--json'])).stdout).aid;
  const unknown = await runBin(['card', stranger, '--data', b]);
  t.is(unknown.code, 1);
  t.regex(unknown.stderr, /^anet: the hub refused: UNKNOWN_AID/);
});

test('SPEC §5.1: a daemon started while its hub is down says so, retries, and publishes once the hub is up', async (t) => {
  const { createServer } = await import('node:net');
  const port = await new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
  const root = await tempDir(t);
  const a = join(root, 'a');
  await runBin(['init', '--data', a]);
  await writeFile(join(a, 'config.json'), JSON.stringify(providerConfig(`http://127.0.0.1:${port}`, [0, 0])));
  const daemon = startBin(t, ['daemon', '--data', a]);
  t.regex(await daemon.waitFor(/cannot reach the hub/), /retrying every 5 s/);
  startBin(t, ['hub', 'start', '--port', String(port), '--data', join(root, 'hub')]);
  t.regex(await daemon.waitFor(/card seq 1 published/, 20_000), new RegExp(`published to http://127.0.0.1:${port}`));
});
