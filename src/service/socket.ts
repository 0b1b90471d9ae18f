// Socket safety (SPEC §3.2): a service socket must be a socket owned by the daemon's user, in a directory
// no other user can write to (unless sticky and owned by the daemon's user or root) — and so must every
// directory above it be, since renaming an ancestor would swap the socket too. The reason returned
// is for the operator; callers are only told `service_unavailable`.
// Synchronous on purpose: a handful of lstat calls on local paths take microseconds, far less than the
// thread-pool round trips and promises of the async forms, and this runs before every call.
import { lstatSync, realpathSync } from 'node:fs';
import { dirname } from 'node:path';

const STICKY = 0o1000;
const WRITABLE_BY_OTHERS = 0o022;

export interface SocketFault {
  /** True when nothing is there yet: the service may simply not be running. */
  missing: boolean;
  reason: string;
}

function unsafeDirectory(dir: string, uid: number): string | null {
  const ds = lstatSync(dir);
  // A directory's owner can always replace entries in it, so it must be us (or root).
  if (ds.uid !== uid && ds.uid !== 0) return `${dir} is owned by uid ${ds.uid}, who could replace the socket; use a directory of your own`;
  if ((ds.mode & WRITABLE_BY_OTHERS) !== 0) {
    const safeSticky = (ds.mode & STICKY) !== 0 && (ds.uid === uid || ds.uid === 0);
    if (!safeSticky) return `${dir} is writable by other users, so the socket could be replaced; use a private directory`;
  }
  return null;
}

export async function checkSocket(path: string, uid = process.getuid?.() ?? 0): Promise<SocketFault | null> {
  const fault = (reason: string, missing = false): SocketFault => ({ missing, reason });
  let st: ReturnType<typeof lstatSync>;
  try {
    st = lstatSync(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'ENOENT' ? fault(`no socket at ${path} (is the service running?)`, true) : fault(`cannot inspect ${path}: ${code}`);
  }
  if (!st.isSocket()) return fault(`${path} is not a socket`);
  if (st.uid !== uid) return fault(`${path} is owned by uid ${st.uid}, not the daemon's uid ${uid}`);
  // Every directory on the way must be safe: whoever can rename an ancestor can swap the whole path.
  // Walk the resolved path (a symlink's own mode bits mean nothing), resolved by libc's realpath: node's
  // own realpathSync lstats each part in JS, twice the time (~25 against ~14 µs here, before every call).
  for (let dir = realpathSync.native(dirname(path)); ; dir = dirname(dir)) {
    const why = unsafeDirectory(dir, uid);
    if (why) return fault(why);
    if (dirname(dir) === dir) break;
  }
  return null;
}
