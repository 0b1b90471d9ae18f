// The node's identity in its data directory: seeds and KEL committed together in one 0600 file, so a
// crash leaves either the old or the new pair, never a KEL whose keys are lost (WIRE.md §2, last rule).
import { readFile, unlink, chmod, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { encodeCanonical, decodeCanonical, bytesEqual, type CborValue } from './cbor.js';
import { newSeed, signerFromSeed, type Signer } from './ed25519.js';
import { incept, rotate, validateKel, encodeKel, digestOfKey, type KelState } from './kel.js';
import { writeFileAtomic, writeFileExclusive, ensureDir, isNotFound, syncDir } from '../util/fsutil.js';

export class IdentityError extends Error {
  override name = 'IdentityError';
}

export interface Identity {
  readonly aid: string;
  readonly kel: KelState;
  readonly signer: Signer;
}

export const identityPaths = (dataDir: string) => ({
  keys: join(dataDir, 'keys'),
  store: join(dataDir, 'keys', 'identity.cbor'),
  pending: join(dataDir, 'keys', 'next.pending'),
  publicKel: join(dataDir, 'kel.cbor'),
});

interface StoreFile {
  current: Uint8Array;
  next: Uint8Array;
  kel: Uint8Array;
}

function encodeStore(s: StoreFile): Uint8Array {
  return encodeCanonical(
    new Map<number, CborValue>([
      [1, s.current],
      [2, s.next],
      [3, s.kel],
    ]),
  );
}

function decodeStore(bytes: Uint8Array, path: string): StoreFile {
  const v = decodeCanonical(bytes);
  const current = v instanceof Map ? v.get(1) : undefined;
  const next = v instanceof Map ? v.get(2) : undefined;
  const kel = v instanceof Map ? v.get(3) : undefined;
  if (!(current instanceof Uint8Array && next instanceof Uint8Array && kel instanceof Uint8Array)) {
    throw new IdentityError(`${path} is not an anet key store`);
  }
  return { current, next, kel };
}

async function commit(dataDir: string, s: StoreFile): Promise<void> {
  const paths = identityPaths(dataDir);
  await writeFileAtomic(paths.store, encodeStore(s), 0o600);
  // The public copy is derived; the key store holds the authoritative KEL.
  await writeFileAtomic(paths.publicKel, s.kel, 0o644);
}

export async function hasIdentity(dataDir: string): Promise<boolean> {
  try {
    await readFile(identityPaths(dataDir).store);
    return true;
  } catch (err) {
    if (isNotFound(err)) return false;
    throw err;
  }
}

export async function createIdentity(dataDir: string, now: number): Promise<Identity> {
  const paths = identityPaths(dataDir);
  if (await hasIdentity(dataDir)) throw new IdentityError(`an identity already exists in ${dataDir}`);
  await ensureDir(paths.keys, 0o700);
  await chmod(paths.keys, 0o700);
  await syncDir(dataDir);
  const current = newSeed();
  const next = newSeed();
  const icp = incept(signerFromSeed(current), signerFromSeed(next).publicKey, now);
  const kel = encodeKel([icp]);
  try {
    // Exclusive: of two concurrent `anet init`, the second fails instead of replacing the first's keys.
    await writeFileExclusive(paths.store, encodeStore({ current, next, kel }), 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new IdentityError(`an identity already exists in ${dataDir}`);
    throw err;
  }
  await writeFileAtomic(paths.publicKel, kel, 0o644);
  return loadIdentity(dataDir);
}

export async function loadIdentity(dataDir: string): Promise<Identity> {
  const path = identityPaths(dataDir).store;
  let bytes: Uint8Array;
  try {
    bytes = await readFile(path);
  } catch (err) {
    if (isNotFound(err)) throw new IdentityError(`no identity in ${dataDir}: run \`anet init\` first`);
    throw err;
  }
  const { s, kel, signer } = checkStore(bytes, path);
  await repairPublicKel(dataDir, s.kel);
  return { aid: kel.aid, kel, signer };
}

/**
 * The key store as read, every part checked; anything wrong is one line naming the file and what to do.
 * The stored KEL is our own: any rule it breaks means the file was damaged, not that a peer cheated.
 */
function checkStore(bytes: Uint8Array, path: string): { s: StoreFile; kel: KelState; signer: Signer } {
  let why: string;
  try {
    const s = decodeStore(bytes, path);
    const kel = validateKel(s.kel);
    const signer = signerFromSeed(s.current);
    if (bytesEqual(signer.publicKey, kel.currentKey) && bytesEqual(digestOfKey(signerFromSeed(s.next).publicKey), kel.nextDigest))
      return { s, kel, signer };
    why = 'the stored keys do not match the stored KEL';
  } catch (err) {
    why = (err as Error).message.split('\n')[0]!.replace(`${path} `, '');
  }
  throw new IdentityError(
    `${path} is damaged (${why}): restore it from a backup; without one this node's AID is lost (move keys/ aside and run \`anet init\` for a new identity)`,
  );
}

/**
 * The key store's mode when others may read or write it (one line with the fix), or null: fine, or no
 * identity yet. `anet doctor` reports it, the daemon warns at start.
 */
export async function identityModeProblem(dataDir: string): Promise<string | null> {
  const path = identityPaths(dataDir).store;
  let mode: number;
  try {
    mode = (await stat(path)).mode & 0o777;
  } catch (err) {
    if (isNotFound(err)) return null;
    throw err;
  }
  if ((mode & 0o077) === 0) return null;
  const octal = mode.toString(8).padStart(4, '0');
  return `${path} is ${mode & 0o044 ? 'readable by other users' : mode & 0o022 ? 'writable by other users' : 'open to other users'} (mode ${octal}): its seeds sign for this node's AID; run \`chmod 600 ${path}\``;
}

/** A crash between the two writes of a commit can leave kel.cbor behind the key store: rewrite it. */
async function repairPublicKel(dataDir: string, kel: Uint8Array): Promise<void> {
  const path = identityPaths(dataDir).publicKel;
  let copy: Uint8Array | undefined;
  try {
    copy = await readFile(path);
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  if (!copy || !bytesEqual(copy, kel)) await writeFileAtomic(path, kel, 0o644);
}

async function readStore(dataDir: string): Promise<StoreFile> {
  const path = identityPaths(dataDir).store;
  return decodeStore(await readFile(path), path);
}

/**
 * Rotates to the pre-rotated key. The caller must hold the data dir (the store's lock), so that two
 * rotations never sign two different events at one seq — that would be duplicity of our own AID. The seed of the key after it is persisted first (next.pending), so a
 * crash at any point either leaves the old identity intact or the rotation complete; a leftover pending
 * seed is reused by the next attempt.
 */
export async function rotateIdentity(dataDir: string, now: number): Promise<Identity> {
  const paths = identityPaths(dataDir);
  const before = await loadIdentity(dataDir);
  const stored = await readStore(dataDir);
  let pending: Uint8Array | undefined;
  try {
    pending = new Uint8Array(await readFile(paths.pending));
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  // A pending seed equal to the stored next one means the last rotation committed but did not clean up.
  if (pending?.length !== 32 || bytesEqual(pending, stored.next)) {
    pending = newSeed();
    await writeFileAtomic(paths.pending, pending, 0o600);
  }
  const next = signerFromSeed(stored.next);
  const rot = rotate(before.kel, before.signer, next, signerFromSeed(pending).publicKey, now);
  const kel = encodeKel([...before.kel.events, rot]);
  await commit(dataDir, { current: stored.next, next: pending, kel });
  await unlink(paths.pending).catch(() => {});
  return loadIdentity(dataDir);
}
