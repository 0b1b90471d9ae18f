// WIRE §4: encryption keys apart from the signing key, a new one every 7 days, valid 14, published as a
// set signed by the identity key; the hub verifies the set on entry.
import test from 'ava';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { tempDir } from './helpers/tmp.js';
import { currentKeys, signKeySet, verifyKeySet, NEW_KEY_EVERY_MS, KEY_VALID_MS } from '../src/relay/keyset.js';
import { createIdentity, rotateIdentity } from '../src/identity/store.js';
import { startTestHub } from './helpers/hub.js';
import { HubClient, HubRefusedError } from '../src/hub-client/client.js';

const T = 1_800_000_000_000;

test('WIRE §4: a new encryption key every 7 days, each valid 14; expired private keys are erased', async (t) => {
  const dir = await tempDir(t);
  const first = await currentKeys(dir, T);
  t.is(first.keys.length, 1);
  t.true(first.changed);
  t.is((await stat(join(dir, 'keys', 'enc.cbor'))).mode & 0o777, 0o600);
  t.false((await currentKeys(dir, T + NEW_KEY_EVERY_MS - 1)).changed);
  const second = await currentKeys(dir, T + NEW_KEY_EVERY_MS);
  t.is(second.keys.length, 2);
  const third = await currentKeys(dir, T + KEY_VALID_MS);
  t.is(third.keys.length, 2, 'the first expired at 14 days, a third was made');
  t.false(third.keys.some((k) => Buffer.compare(k.kid, first.keys[0]!.kid) === 0));
  t.is(third.keys.length, new Set(third.keys.map((k) => Buffer.from(k.kid).toString('hex'))).size);
});

test('WIRE §4: the set verifies under the current key only; the hub refuses a set signed by another', async (t) => {
  const root = await tempDir(t);
  const node = join(root, 'node');
  const id = await createIdentity(node, Date.now());
  const { keys } = await currentKeys(node, Date.now());
  const set = signKeySet(id, keys);
  const valid = verifyKeySet(set, id.kel, Date.now());
  t.deepEqual(
    valid.map((k) => k.publicKey),
    keys.map((k) => k.publicKey),
  );
  t.deepEqual(verifyKeySet(set, id.kel, Date.now() + KEY_VALID_MS + 1), [], 'expired keys are not offered');

  const hub = await startTestHub({ dataDir: join(root, 'hub'), port: 0 });
  t.teardown(() => hub.close());
  const client = new HubClient(hub.url, id);
  await client.register('n', null);
  await client.putKeys(set);
  t.deepEqual(Buffer.from(await new HubClient(hub.url).keys(id.aid)), Buffer.from(set));
  const other = await createIdentity(join(root, 'other'), Date.now());
  const forged = signKeySet({ ...other, aid: id.aid, kel: id.kel }, keys);
  await t.throwsAsync(client.putKeys(forged), { instanceOf: HubRefusedError, message: /BAD_KEY_SET/ });

  const rotated = await rotateIdentity(node, Date.now());
  t.throws(
    () => verifyKeySet(set, rotated.kel, Date.now()),
    { message: /current key/ },
    'a set signed before a rotation must be re-signed',
  );
});
