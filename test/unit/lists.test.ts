// SPEC §2.1 (peer lists: one AID per line, comments, missing = empty, trust includes allow, re-read on
// every decision, an unreadable deny file denies everyone) and the `anet allow|trust|deny` commands.
import test from 'ava';
import { writeFile, readFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { tempDir } from '../helpers/tmp.js';
import { runCli } from '../helpers/cli.js';
import { editList, standing } from '../../src/contacts/lists.js';
import { validateConfig } from '../../src/config/load.js';
import { testIdentity } from '../helpers/identity.js';

const [p1, p2, p3] = ['l1', 'l2', 'l3'].map((tag) => testIdentity(tag).kel.aid) as [string, string, string];

test('SPEC §2.1: standing is read from the files at each decision; deny wins; trust includes allow', async (t) => {
  const dir = await tempDir(t);
  const config = validateConfig({}).config!;
  t.is(await standing(dir, config, p1), 'stranger', 'missing files are empty lists');
  await writeFile(join(dir, 'peers.allow'), `# friends\n${p1}   # alice\n\nnot-an-aid\n`);
  await writeFile(join(dir, 'peers.trust'), `${p2}\n`);
  t.is(await standing(dir, config, p1), 'allowed');
  t.is(await standing(dir, config, p2), 'trusted');
  t.is(await standing(dir, config, p3), 'stranger');
  await writeFile(join(dir, 'peers.deny'), `${p2}\n`);
  t.is(await standing(dir, config, p2), 'denied', 'no restart needed');
});

test('SPEC §2.1: an edit is seen by the next decision, whether the node made it or it was made by hand', async (t) => {
  const dir = await tempDir(t);
  const config = validateConfig({}).config!;
  t.is(await standing(dir, config, p1), 'stranger');
  await editList(join(dir, 'peers.deny'), 'add', p1);
  t.is(await standing(dir, config, p1), 'denied', 'an edit through editList (anet deny add)');
  await writeFile(join(dir, 'peers.deny'), '');
  await new Promise((resolve) => setImmediate(resolve));
  t.is(await standing(dir, config, p1), 'stranger', 'an edit by hand, from the next turn of the event loop');
});

test('SPEC §2.1: an unreadable deny file denies everyone', async (t) => {
  const dir = await tempDir(t);
  const config = validateConfig({}).config!;
  await writeFile(join(dir, 'peers.trust'), `${p1}\n`);
  await mkdir(join(dir, 'peers.deny'));
  t.is(await standing(dir, config, p1), 'denied');
});

test('SPEC §12: anet allow|trust|deny add, rm and ls keep comments and other lines', async (t) => {
  const dir = await tempDir(t);
  await writeFile(join(dir, 'peers.allow'), `# my allow list\n${p1}\n`);
  t.is((await runCli(['allow', 'add', p2, '--data', dir])).stdout, `added to the allow list: ${p2}`);
  t.regex((await runCli(['allow', 'add', p2, '--data', dir])).stdout, /already on the allow list/);
  t.is(await readFile(join(dir, 'peers.allow'), 'utf8'), `# my allow list\n${p1}\n${p2}\n`);
  t.is((await runCli(['allow', 'rm', p1, '--data', dir])).code, 0);
  t.is(await readFile(join(dir, 'peers.allow'), 'utf8'), `# my allow list\n${p2}\n`);
  t.deepEqual(JSON.parse((await runCli(['allow', 'ls', '--json', '--data', dir])).stdout).aids, [p2]);
  t.is((await runCli(['trust', 'ls', '--data', dir])).stdout, `the trust list is empty (${join(dir, 'peers.trust')})`);
  t.is((await runCli(['deny', 'add', 'nope', '--data', dir])).code, 2);
  t.is((await runCli(['deny', 'frob', '--data', dir])).code, 2);
});
