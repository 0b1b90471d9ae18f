// The keys of a call's files while its request waits in the outbox (resend.ts), kept beside the store,
// not in it: a file's key must be gone from disk once the provider has its request (SPEC §9.3: a
// `discard` call leaves nothing), and LevelDB cannot forget — a deleted entry stays in its log, and an
// overwritten one in its tables, until compactions that it may never run on the bottom level. A file
// that is unlinked is gone from the data dir. One file per task, `outbox-keys/<task>`, mode 0600: the
// files' CIDs and keys as JSON. Written before the outbox entry (the entry's file references then carry
// no key), deleted once the entry has let its request go; like the outbox, it survives a crash of the
// process (no fsync: the outbox's grouped writes are not synced either).
import { readdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ensureDir, isNotFound } from '../../util/fsutil.js';
import type { FileRef } from '../../protocol/file-ref.js';
import { KEY_BYTES } from '../../protocol/blob-seal.js';
import { fileRefsOf, type Request } from './send.js';

type RequestFile = NonNullable<Request['files']>[number];
/** A file reference whose key was set aside (the outbox keeps it with an empty key). */
const keyAside = (f: RequestFile): f is FileRef => 'cid' in f && f.key.length === 0;

/** Whether the request, as the outbox keeps it, has keys set aside. */
export const keysSetAside = (request: Request): boolean => request.files?.some(keyAside) ?? false;

export class FileKeys {
  constructor(private readonly dir: string) {}

  /** The request as the outbox keeps it: its files' keys written aside first, and left out of it. */
  async setAside(task: string, request: Request): Promise<Request> {
    const refs = fileRefsOf(request);
    if (!refs.length) return request;
    await ensureDir(this.dir, 0o700);
    const keys = Object.fromEntries(refs.map((f) => [f.cid, Buffer.from(f.key).toString('base64')]));
    await writeFile(this.path(task), JSON.stringify(keys), { mode: 0o600 });
    return { ...request, files: request.files!.map((f) => ('cid' in f ? { ...f, key: new Uint8Array() } : f)) };
  }

  /**
   * The request with its files' keys put back (to be sent again); as it is when none were set aside.
   * Throws when they cannot be read: the file is gone, damaged, or lacks a file's key.
   */
  async restore(task: string, request: Request): Promise<Request> {
    if (!keysSetAside(request)) return request;
    const keys = await this.read(task);
    const keyOf = (cid: string) => {
      const key = typeof keys[cid] === 'string' ? new Uint8Array(Buffer.from(keys[cid], 'base64')) : null;
      if (key?.length !== KEY_BYTES) throw new Error(`outbox-keys/${task} has no key for ${cid}`);
      return key;
    };
    return { ...request, files: request.files!.map((f) => (keyAside(f) ? { ...f, key: keyOf(f.cid) } : f)) };
  }

  /** Deletes a task's keys (none is no error). */
  async drop(task: string): Promise<void> {
    await unlink(this.path(task)).catch((err) => {
      if (!isNotFound(err)) throw err;
    });
  }

  /** At start: deletes the keys of every task but those `kept` (the others' outbox entries are gone: a crash came between the two). */
  async dropUnless(kept: (task: string) => boolean): Promise<void> {
    const names = await readdir(this.dir).catch((err) => {
      if (isNotFound(err)) return [] as string[];
      throw err;
    });
    for (const name of names) if (!kept(name)) await unlink(join(this.dir, name)).catch(() => {});
  }

  private async read(task: string): Promise<Record<string, unknown>> {
    let text: string;
    try {
      text = await readFile(this.path(task), 'utf8');
    } catch (err) {
      throw new Error(isNotFound(err) ? `outbox-keys/${task} is gone` : `outbox-keys/${task}: ${(err as Error).message}`);
    }
    try {
      const keys = JSON.parse(text) as unknown;
      if (typeof keys === 'object' && keys !== null && !Array.isArray(keys)) return keys as Record<string, unknown>;
    } catch {}
    throw new Error(`outbox-keys/${task} is damaged`);
  }

  private path(task: string): string {
    // Task ids are hex made here (randomHex); anything else never names a file.
    if (!/^[0-9a-f]{1,64}$/.test(task)) throw new Error(`not a task id: ${task}`);
    return join(this.dir, task);
  }
}
