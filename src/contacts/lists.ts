// Peer lists (SPEC §2.1): allow, trust and deny files in the data dir, one full AID per line, `#` starts
// a comment, a missing file is an empty list, trust includes allow. They are looked at for every decision
// (the decisions of one turn of the event loop share the look), so edits need no restart; an unreadable
// deny file denies everyone (fail closed).
import { readFile } from 'node:fs/promises';
import { statSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import type { Config } from '../config/schema.js';
import { isAid } from '../identity/cid.js';
import { writeFileAtomic, isNotFound } from '../util/fsutil.js';
import { perTurn } from '../util/per-turn.js';

export type ListName = 'allow' | 'trust' | 'deny';
export type Standing = 'denied' | 'trusted' | 'allowed' | 'stranger';

export function listPath(dataDir: string, config: Config, list: ListName): string {
  const file = config.inbound[`${list}_file`];
  return isAbsolute(file) ? file : join(dataDir, file);
}

const bare = (line: string) => line.replace(/#.*/, '').trim();

export interface ListFile {
  aids: Set<string>;
  lines: string[];
  /** Set when the file exists but cannot be read. */
  error?: string;
}

export async function readList(path: string): Promise<ListFile> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if (isNotFound(err)) return { aids: new Set(), lines: [] };
    return { aids: new Set(), lines: [], error: `cannot read ${path}: ${(err as NodeJS.ErrnoException).code}` };
  }
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const aids = new Set(lines.map(bare).filter(isAid));
  return { aids, lines };
}

const parsed = new Map<string, { version: string; list: ListFile }>();

/** The file's version (inode, size, mtime, ctime: an edit, a replacement or a rename changes one), or why there is none. */
type Version = { version: string } | { missing: true } | { error: string };

/**
 * One stat per list and turn of the event loop (see perTurn), synchronous: microseconds on a local file,
 * far cheaper than a thread-pool round trip; the decisions of one turn share it, and an edit is seen
 * from the next turn (`anet deny add` writes from its own process; editList here spans turns anyway).
 */
const versionOf = perTurn((path: string): Version => {
  try {
    const st = statSync(path, { bigint: true, throwIfNoEntry: false });
    return st ? { version: `${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}` } : { missing: true };
  } catch (err) {
    if (isNotFound(err)) return { missing: true };
    return { error: `cannot read ${path}: ${(err as NodeJS.ErrnoException).code}` };
  }
});

/** The list as the file is now: parsed again only when its version changed. */
async function currentList(path: string): Promise<ListFile> {
  const v = versionOf(path);
  if ('missing' in v) return { aids: new Set(), lines: [] };
  if ('error' in v) return { aids: new Set(), lines: [], error: v.error };
  const hit = parsed.get(path);
  if (hit?.version === v.version) return hit.list;
  const list = await readList(path);
  if (parsed.size > 64) parsed.clear();
  if (!list.error) parsed.set(path, { version: v.version, list });
  return list;
}

/** Where a peer stands, decided from the files as they are now (deny first; trust includes allow). */
export async function standing(dataDir: string, config: Config, aid: string): Promise<Standing> {
  const [deny, trust, allow] = await Promise.all(
    (['deny', 'trust', 'allow'] as const).map((l) => currentList(listPath(dataDir, config, l))),
  );
  if (deny!.error || deny!.aids.has(aid)) return 'denied';
  if (trust!.aids.has(aid)) return 'trusted';
  if (allow!.aids.has(aid)) return 'allowed';
  return 'stranger';
}

/** Adds an AID (kept once) or removes it, keeping every other line and comment as it was. */
export async function editList(path: string, op: 'add' | 'rm', aid: string): Promise<boolean> {
  const file = await readList(path);
  if (file.error) throw new Error(file.error);
  if (op === 'add') {
    if (file.aids.has(aid)) return false;
    await writeFileAtomic(path, `${[...file.lines, aid].join('\n')}\n`, 0o600);
    return true;
  }
  if (!file.aids.has(aid)) return false;
  const kept = file.lines.filter((line) => bare(line) !== aid);
  await writeFileAtomic(path, kept.length ? `${kept.join('\n')}\n` : '', 0o600);
  return true;
}
