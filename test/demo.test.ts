// SPEC §12 `anet demo` (what `npm start` runs): the guided tour finishes without error — a hub, two nodes,
// find, card with signed prices, a free call, credits, a paid call, the audit — and leaves nothing behind.
import test from 'ava';
import { readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { runBin } from './helpers/cli.js';

test('SPEC §12: anet demo walks find, card, a free call, a paid call and the audit, and removes its directory', async (t) => {
  const before = new Set((await readdir(tmpdir())).filter((n) => n.startsWith('anet-demo-')));
  const r = await runBin(['demo']);
  t.is(r.code, 0, r.stderr);
  t.regex(r.stdout, /translator\s+some skills paid\s+confirmed/);
  t.regex(r.stdout, /text\.reverse\s+3 credits/);
  t.regex(r.stdout, /"hello": "world"[\s\S]*receipt bafyrei\S+ \(signed by the provider, verified\)/);
  t.regex(r.stdout, /"text": "desserts"[\s\S]*paid 3 credits \(hub transaction tx_/);
  t.regex(r.stdout, /balance 17 credits \(0 held\)/);
  t.regex(r.stdout, /3 credits\s+auto\s+payment-completed\s+hub tx_\S+\s+checked against 3 credits signed in card seq 1/);
  t.regex(r.stdout, /Demo finished\.$/m);
  const left = (await readdir(tmpdir())).filter((n) => n.startsWith('anet-demo-') && !before.has(n));
  t.deepEqual(left, [], 'the temporary directory is removed');
});
