// The local A2A endpoint's bearer token (SPEC §12): `<data>/a2a.token`, 32 random bytes as hex, mode
// 0600. Made at the first daemon start and kept afterwards, so a client configured once keeps working;
// an operator who wants a new one deletes the file and restarts the daemon.
import { randomBytes, createHash, timingSafeEqual } from 'node:crypto';
import { writeFileExclusive } from '../util/fsutil.js';
import { a2aTokenPath, readTokenFile } from '../config/environment.js';

/** The token, created when absent; refuses a file other users can read or a token that is too short. */
export async function ensureToken(dataDir: string): Promise<string> {
  const path = a2aTokenPath(dataDir);
  try {
    await writeFileExclusive(path, `${randomBytes(32).toString('hex')}\n`, 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const read = await readTokenFile(path);
  if ('error' in read) throw new Error(`local A2A endpoint not started: ${read.error}`);
  return read.token;
}

/** Whether an `Authorization` header carries the token; compared in constant time (as digests, so lengths may differ). */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const m = /^Bearer +(\S+) *$/i.exec(header ?? '');
  if (!m) return false;
  const digest = (s: string) => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(m[1]!), digest(token));
}
