// Hostile probes of one node (issue 18: items 6, 7, 9): damaged key and store files, oversized MCP input,
// a service's absurd Retry-After, unpadded base64 and hostile file names. Each reproduces what a probe
// found, against real files, sockets and processes in temp dirs, bounded in time (no fixed sleeps).
import test from 'ava';
import { readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { runCli } from '../helpers/cli.js';
import { tempDir } from '../helpers/tmp.js';
import { Store } from '../../store/db.js';

/** A data dir with an identity and a store that has been opened (and closed) once. */
async function nodeDir(t: Parameters<typeof tempDir>[0]): Promise<string> {
  const dir = join(await tempDir(t), 'node');
  const init = await runCli(['init', '--data', dir, '--json']);
  if (init.code !== 0) throw new Error(init.stderr);
  await writeFile(join(dir, 'config.json'), JSON.stringify({ hub: 'http://127.0.0.1:1' }));
  const store = await Store.open(dir);
  await store.close();
  return dir;
}

test('SPEC §14 (hostile): a damaged LevelDB CURRENT or MANIFEST in <data>/store is one line naming the file and what to do', async (t) => {
  const dir = await nodeDir(t);
  const storeDir = join(dir, 'store');
  const manifest = (await readdir(storeDir)).find((f) => f.startsWith('MANIFEST-'))!;
  const current = await readFile(join(storeDir, 'CURRENT'));

  await writeFile(join(storeDir, 'CURRENT'), 'garbage\n');
  const badCurrent = await runCli(['tasks', '--data', dir]);
  t.is(badCurrent.code, 1);
  t.false(badCurrent.stderr.includes('\n'), badCurrent.stderr);
  t.true(badCurrent.stderr.includes(join(storeDir, 'CURRENT')), badCurrent.stderr);
  t.regex(badCurrent.stderr, /restore/);

  await writeFile(join(storeDir, 'CURRENT'), current);
  const bytes = await readFile(join(storeDir, manifest));
  bytes[10]! ^= 0xff;
  await writeFile(join(storeDir, manifest), bytes);
  const badManifest = await runCli(['tasks', '--data', dir]);
  t.is(badManifest.code, 1);
  t.false(badManifest.stderr.includes('\n'), badManifest.stderr);
  t.true(badManifest.stderr.includes(join(storeDir, manifest)), badManifest.stderr);
  t.regex(badManifest.stderr, /restore/);
});
