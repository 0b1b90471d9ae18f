// SPEC §12 offline tool, WIRE §3.4: `anet card verify <card.json> --kel <kel file> [--now MS]` prints ok
// or the verification code and exits 0 or 1 — with no hub and no daemon.
import test from 'ava';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startNet, providerConfig } from './helpers/net.js';
import { runCli } from './helpers/cli.js';
import { HubClient } from '../src/hub-client/client.js';

test('SPEC §12, WIRE §3.4: anet card verify checks a saved card against a saved KEL, offline', async (t) => {
  const net = await startNet(t);
  const p = await net.node('p', providerConfig([{ id: 'text.summarize' }], 'open'));
  const other = await net.node('other');
  const daemon = await net.start(p.dir);
  const wire = await new HubClient(net.hub.url).card(p.aid);
  await daemon.close();
  const card = join(net.root, 'card.json');
  const kel = join(net.root, 'kel.cbor');
  const otherKel = join(net.root, 'other.hex');
  await writeFile(card, wire);
  t.is((await runCli(['kel', 'export', kel, '--data', p.dir])).code, 0);
  t.is((await runCli(['kel', 'export', otherKel, '--hex', '--data', other.dir])).code, 0);
  const ok = await runCli(['card', 'verify', card, '--kel', kel]);
  t.is(ok.code, 0, ok.stderr);
  t.is(ok.stdout, 'ok');
  t.like(JSON.parse((await runCli(['card', 'verify', card, '--kel', kel, '--json'])).stdout), { ok: true, aid: p.aid, seq: '1', ksn: 0 });
  const tampered = join(net.root, 'tampered.json');
  await writeFile(tampered, wire.replace('text.summarize', 'text.summarise'));
  const bad = await runCli(['card', 'verify', tampered, '--kel', kel]);
  t.is(bad.code, 1);
  t.regex(bad.stdout, /^INVALID_SIGNATURE: /);
  t.regex((await runCli(['card', 'verify', card, '--kel', otherKel])).stdout, /^UNKNOWN_AID: /, "another AID's KEL");
  t.regex(
    (await runCli(['card', 'verify', card, '--kel', kel, '--now', '1000'])).stdout,
    /^CARD_NOT_YET_VALID: /,
    'checked at a moment before it was issued',
  );
  t.is((await runCli(['card', 'verify', card])).code, 2, 'the KEL is required');
});
