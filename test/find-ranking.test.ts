// SPEC §6.4 (`anet find`) over SPEC §11's ranked directory (issue 19): the node shows the hub's order, so
// an agent whose skill id names the word comes before one that only mentions it in a description, and a
// prefix finds it. Real hub, real daemons.
import test from 'ava';
import { startNet, providerConfig } from './helpers/net.js';
import { runCli } from './helpers/cli.js';

const find = async (dir: string, ...words: string[]) => {
  const r = await runCli(['find', ...words, '--json', '--data', dir]);
  if (r.code !== 0) throw new Error(r.stderr);
  return (JSON.parse(r.stdout) as { aid: string }[]).map((a) => a.aid);
};

test('SPEC §6.4, §11: anet find lists in the hub ranking: a skill id match before a description mention; prefixes match', async (t) => {
  const net = await startNet(t);
  // Each names one word in a skill id and mentions the other in a description: one of the two searches
  // below has them against AID order, whichever AIDs they drew.
  const translator = await net.node(
    'translator',
    providerConfig([{ id: 'text.translate', description: 'Translates a text; it also summarizes it on request.' }], 'open'),
  );
  const summarizer = await net.node(
    'summarizer',
    providerConfig([{ id: 'text.summarize', description: 'Summarises any text; it can translate the summary into French.' }], 'open'),
  );
  const other = await net.node('other', providerConfig([{ id: 'image.resize' }], 'open'));
  for (const n of [translator, summarizer, other]) await net.start(n.dir);
  const reader = await net.node('reader');

  t.deepEqual(await find(reader.dir, 'translate'), [translator.aid, summarizer.aid]);
  t.deepEqual(await find(reader.dir, 'summarize'), [summarizer.aid, translator.aid]);
  t.deepEqual(await find(reader.dir, 'transl'), [translator.aid, summarizer.aid], 'a prefix matches');
  t.deepEqual(await find(reader.dir, 'translate', 'french'), [summarizer.aid], 'all words must match');
});
