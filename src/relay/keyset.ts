// Encryption keys (WIRE §4): X25519 keys apart from the signing key, published as a set signed by the
// identity's current key; a new key every 7 days, each valid for 14. Private halves stay in
// `keys/enc.cbor` (0600) in the data dir.
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { encodeCanonical, decodeCanonical, bytesEqual, type CborValue } from '../identity/cbor.js';
import { generateX25519, x25519PublicOf, type X25519KeyPair } from '../protocol/hpke.js';
import { writeFileAtomic, isNotFound, ensureDir } from '../util/fsutil.js';

export const NEW_KEY_EVERY_MS = 7 * 24 * 3_600_000;
export const KEY_VALID_MS = 14 * 24 * 3_600_000;

export interface EncryptionKey extends X25519KeyPair {
  kid: Uint8Array;
  notBefore: number;
  notAfter: number;
}

// The published set's format is the wire's (src/protocol/keyset.ts); what is here is the node's side.
export { signKeySet, verifyKeySet, type PublicEncryptionKey } from '../protocol/keyset.js';

export const encKeysPath = (dataDir: string) => join(dataDir, 'keys', 'enc.cbor');
const path = encKeysPath;

/** A damaged `keys/enc.cbor`: the message is one line naming the file, what is wrong and what to do. */
export class KeyFileError extends Error {
  override name = 'KeyFileError';
  constructor(
    readonly path: string,
    why: string,
  ) {
    super(
      `${path} is damaged (${why}): move it aside and restart; the node then makes new encryption keys and publishes them on the hub, where peers fetch them (a peer's cached copy of the old ones lasts up to an hour)`,
    );
  }
}

async function loadKeys(dataDir: string): Promise<EncryptionKey[]> {
  let bytes: Uint8Array;
  try {
    bytes = await readFile(path(dataDir));
  } catch (err) {
    if (isNotFound(err)) return [];
    throw err;
  }
  return decodeKeys(bytes, path(dataDir));
}

const isTime = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/**
 * The keys of the file, each checked: a private key that no longer matches its public key (one flipped
 * bit) would still decode, and every message sealed to the published key would then fail to open.
 */
function decodeKeys(bytes: Uint8Array, file: string): EncryptionKey[] {
  let list: CborValue;
  try {
    list = decodeCanonical(bytes);
  } catch (err) {
    throw new KeyFileError(file, (err as Error).message.split('\n')[0]!);
  }
  if (!Array.isArray(list)) throw new KeyFileError(file, 'not a list of keys');
  return list.map((m, i) => {
    const key =
      m instanceof Map ? { kid: m.get(1), privateKey: m.get(2), publicKey: m.get(3), notBefore: m.get(4), notAfter: m.get(5) } : {};
    const { kid, privateKey, publicKey, notBefore, notAfter } = key as Record<string, unknown>;
    const bytesOf = (v: unknown, n: number): v is Uint8Array => v instanceof Uint8Array && v.length === n;
    if (
      !bytesOf(kid, 16) ||
      !bytesOf(privateKey, 32) ||
      !bytesOf(publicKey, 32) ||
      !isTime(notBefore) ||
      !isTime(notAfter) ||
      notBefore >= notAfter
    ) {
      throw new KeyFileError(file, `key ${i + 1} is not a well-formed key entry`);
    }
    if (!bytesEqual(x25519PublicOf(privateKey), publicKey))
      throw new KeyFileError(file, `the private half of key ${i + 1} does not match its public half`);
    return { kid, privateKey, publicKey, notBefore, notAfter };
  });
}

/** What is wrong with `keys/enc.cbor` (one line, see KeyFileError), or null: sound, or none yet (the first start makes it). */
export async function checkKeyFile(dataDir: string): Promise<string | null> {
  try {
    await loadKeys(dataDir);
    return null;
  } catch (err) {
    if (err instanceof KeyFileError) return err.message;
    return `${path(dataDir)} cannot be read (${(err as Error).message}): make it readable by the daemon's user`;
  }
}

async function saveKeys(dataDir: string, keys: EncryptionKey[]): Promise<void> {
  const list = keys.map(
    (k) =>
      new Map<number, CborValue>([
        [1, k.kid],
        [2, k.privateKey],
        [3, k.publicKey],
        [4, k.notBefore],
        [5, k.notAfter],
      ]),
  );
  await ensureDir(join(dataDir, 'keys'), 0o700);
  await writeFileAtomic(path(dataDir), encodeCanonical(list), 0o600);
}

/** The keys valid now, adding a new one when the newest is 7 days old; expired ones are erased. */
export async function currentKeys(dataDir: string, now: number): Promise<{ keys: EncryptionKey[]; changed: boolean }> {
  const stored = await loadKeys(dataDir);
  const keys = stored.filter((k) => k.notAfter > now);
  const newest = Math.max(-Infinity, ...keys.map((k) => k.notBefore));
  let changed = keys.length !== stored.length;
  if (!(newest > now - NEW_KEY_EVERY_MS)) {
    keys.push({ ...generateX25519(), kid: new Uint8Array(randomBytes(16)), notBefore: now, notAfter: now + KEY_VALID_MS });
    changed = true;
  }
  if (changed) await saveKeys(dataDir, keys);
  return { keys, changed };
}
