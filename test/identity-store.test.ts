// WIRE.md §2 (persist the next key first; key store and KEL committed atomically) and the CLI around it.
import test from 'ava';
import { stat, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { tempDir } from './helpers/tmp.js';
import { runBin, runCli } from './helpers/cli.js';
import { createIdentity, loadIdentity, rotateIdentity, identityPaths } from '../src/identity/store.js';
import { signerFromSeed } from '../src/identity/ed25519.js';
import { digestOfKey, validateKel } from '../src/identity/kel.js';
import { isAid } from '../src/identity/cid.js';

test('WIRE §2: the AID is unchanged across rotations and each rotation moves the current key', async (t) => {
  const dir = await tempDir(t);
  const first = await createIdentity(dir, 1000);
  t.true(isAid(first.aid));
  const keys = [first.signer.publicKey];
  let id = first;
  for (let i = 1; i <= 3; i++) {
    id = await rotateIdentity(dir, 1000 + i);
    t.is(id.aid, first.aid);
    t.is(id.kel.ksn, i);
    keys.push(id.signer.publicKey);
  }
  t.is(new Set(keys.map((k) => Buffer.from(k).toString('hex'))).size, 4);
  const publicKel = validateKel(new Uint8Array(await readFile(identityPaths(dir).publicKel)));
  t.is(publicKel.ksn, 3);
  t.is((await loadIdentity(dir)).kel.ksn, 3);
});

test('WIRE §2: keys are stored with mode 0600 in a 0700 directory', async (t) => {
  const dir = await tempDir(t);
  await createIdentity(dir, 1);
  await rotateIdentity(dir, 2);
  const paths = identityPaths(dir);
  t.is((await stat(paths.store)).mode & 0o777, 0o600);
  t.is((await stat(paths.keys)).mode & 0o777, 0o700);
});

test('WIRE §2: a rotation that crashed after persisting the pending seed reuses it', async (t) => {
  const dir = await tempDir(t);
  await createIdentity(dir, 1);
  const pending = new Uint8Array(32).fill(7);
  await writeFile(identityPaths(dir).pending, pending, { mode: 0o600 });
  const rotated = await rotateIdentity(dir, 2);
  t.deepEqual(rotated.kel.nextDigest, digestOfKey(signerFromSeed(pending).publicKey));
  await t.throwsAsync(stat(identityPaths(dir).pending), { code: 'ENOENT' });
});

test('WIRE §2: a rotation that committed but left its pending seed does not reuse the next key', async (t) => {
  const dir = await tempDir(t);
  await createIdentity(dir, 1);
  await rotateIdentity(dir, 2);
  // Simulate the crash window after commit: the pending seed equals the stored next seed.
  const store = await readFile(identityPaths(dir).store);
  const { decodeCanonical } = await import('../src/identity/cbor.js');
  const next = (decodeCanonical(store) as Map<number, Uint8Array>).get(2)!;
  await writeFile(identityPaths(dir).pending, next, { mode: 0o600 });
  const again = await rotateIdentity(dir, 3);
  t.is(again.kel.ksn, 2);
  t.notDeepEqual(again.kel.nextDigest, digestOfKey(again.signer.publicKey));
  t.notDeepEqual(again.kel.nextDigest, digestOfKey(signerFromSeed(next).publicKey));
});

test('WIRE §2: a key store whose keys do not match its KEL is refused on load', async (t) => {
  const a = await tempDir(t);
  const b = await tempDir(t);
  await createIdentity(a, 1);
  await createIdentity(b, 1);
  await writeFile(identityPaths(a).store, await readFile(identityPaths(b).store));
  t.is((await loadIdentity(a)).aid, (await loadIdentity(b)).aid, 'a whole store copied is consistent');
  const { encodeCanonical, decodeCanonical } = await import('../src/identity/cbor.js');
  const mixed = decodeCanonical(await readFile(identityPaths(a).store)) as Map<number, Uint8Array>;
  mixed.set(1, new Uint8Array(32).fill(1));
  await writeFile(identityPaths(a).store, encodeCanonical(mixed));
  await t.throwsAsync(loadIdentity(a), { message: /do not match/ });
});

test('SPEC §12: anet init, id, key rotate and kel export|verify through the real binary', async (t) => {
  const dir = join(await tempDir(t), 'node');
  const init = await runBin(['init', '--data', dir, '--json']);
  t.is(init.code, 0, init.stderr);
  const { aid } = JSON.parse(init.stdout);
  t.true(isAid(aid));
  t.is((await stat(dir)).mode & 0o777, 0o700);
  t.regex(await readFile(join(dir, 'config.json'), 'utf8'), /\/\/ ANet node configuration/);

  const again = await runBin(['init', '--data', dir]);
  t.is(again.code, 1);
  t.regex(again.stderr, /^anet: .*already holds an identity/);

  t.is((await runBin(['id'], { ANET_DATA_DIR: dir })).stdout.trim(), aid);
  const rot = await runBin(['key', 'rotate', '--data', dir]);
  t.is(rot.code, 0, rot.stderr);
  t.regex(rot.stdout, /key #1/);
  t.is((await runBin(['id', '--data', dir])).stdout.trim(), aid);

  const kelFile = join(dir, 'exported.cbor');
  t.is((await runBin(['kel', 'export', kelFile, '--data', dir])).code, 0);
  const ok = await runBin(['kel', 'verify', kelFile]);
  t.is(ok.code, 0);
  t.is(ok.stdout.trim(), `ok ${aid} ksn 1 (2 events)`);

  const bytes = new Uint8Array(await readFile(kelFile));
  bytes[bytes.length - 1] = bytes[bytes.length - 1]! ^ 1; // the last event id's last character
  await writeFile(kelFile, bytes);
  const bad = await runBin(['kel', 'verify', kelFile, '--json']);
  t.is(bad.code, 1);
  t.is(JSON.parse(bad.stdout).ok, false);
});

test('SPEC §12: usage errors exit 2, failures exit 1, each with one line', async (t) => {
  const dir = await tempDir(t);
  const unknown = await runCli(['frobnicate', '--data', dir]);
  t.is(unknown.code, 2);
  t.is(unknown.stderr.split('\n').length, 1);
  t.is((await runCli(['key', 'turn', '--data', dir])).code, 2);
  t.is((await runCli(['id', '--bogus'])).code, 2);
  const none = await runCli(['id', '--data', dir]);
  t.is(none.code, 1);
  t.regex(none.stderr, /^anet: no identity in .*: run `anet init` first$/);
});

test('WIRE §2: concurrent `anet key rotate` runs never sign two events at one seq', async (t) => {
  const dir = join(await tempDir(t), 'node');
  await runBin(['init', '--data', dir]);
  const runs = await Promise.all([0, 1, 2].map(() => runBin(['key', 'rotate', '--data', dir])));
  const ok = runs.filter((r) => r.code === 0).length;
  t.true(ok >= 1);
  for (const r of runs.filter((r) => r.code !== 0)) t.regex(r.stderr, /another anet is running with this data dir/);
  const kel = validateKel(new Uint8Array(await readFile(identityPaths(dir).publicKel)));
  t.is(kel.ksn, ok, 'one rotation per successful run, in one chain');
  t.is((await loadIdentity(dir)).kel.ksn, ok);
});

test('WIRE §2: two concurrent creations leave one identity, not a mix', async (t) => {
  const dir = await tempDir(t);
  const results = await Promise.allSettled([createIdentity(dir, 1), createIdentity(dir, 2)]);
  const made = results.filter((r) => r.status === 'fulfilled') as PromiseFulfilledResult<Awaited<ReturnType<typeof createIdentity>>>[];
  t.true(made.length >= 1);
  const loaded = await loadIdentity(dir);
  t.true(made.some((m) => m.value.aid === loaded.aid));
  t.is(validateKel(new Uint8Array(await readFile(identityPaths(dir).publicKel))).aid, loaded.aid);
});
