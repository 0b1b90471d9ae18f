// File writes that survive a crash: write a temp file, fsync it, rename over the target, fsync the directory.
import { open, rename, mkdir, unlink, link } from 'node:fs/promises';
import { dirname, join, basename } from 'node:path';

/** Writes a synced temporary file beside `path` and returns its name. */
async function writeTemp(path: string, data: Uint8Array | string, mode: number, suffix: string): Promise<string> {
  const tmp = join(dirname(path), `.${basename(path)}.${process.pid}.${suffix}`);
  const file = await open(tmp, 'w', mode);
  try {
    await file.writeFile(data);
    await file.chmod(mode); // the umask may have narrowed or the file existed with other bits
    await file.sync();
  } finally {
    await file.close();
  }
  return tmp;
}

export async function writeFileAtomic(path: string, data: Uint8Array | string, mode = 0o600): Promise<void> {
  const tmp = await writeTemp(path, data, mode, 'tmp');
  try {
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => {});
    throw err;
  }
  await syncDir(dirname(path));
}

/** Like writeFileAtomic, but fails with EEXIST instead of replacing an existing file. */
export async function writeFileExclusive(path: string, data: Uint8Array | string, mode = 0o600): Promise<void> {
  const tmp = await writeTemp(path, data, mode, 'new');
  try {
    await link(tmp, path); // atomic, and refuses to overwrite
  } finally {
    await unlink(tmp).catch(() => {});
  }
  await syncDir(dirname(path));
}

export async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

export async function ensureDir(dir: string, mode = 0o700): Promise<void> {
  await mkdir(dir, { recursive: true, mode });
}

export function isNotFound(err: unknown): boolean {
  return (err as NodeJS.ErrnoException)?.code === 'ENOENT';
}
