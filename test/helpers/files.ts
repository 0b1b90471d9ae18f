import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

/** Every file under `dir` whose raw bytes contain `marker` (to prove what a data dir does not hold). */
export async function filesContaining(dir: string, marker: string): Promise<string[]> {
  const hits: string[] = [];
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    if ((await readFile(path)).includes(marker)) hits.push(path);
  }
  return hits;
}
