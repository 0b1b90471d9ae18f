import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

/** `--data DIR`, else `$ANET_DATA_DIR`, else `~/.anet` (SPEC §2). */
export function resolveDataDir(flag: string | undefined): string {
  if (flag) return resolve(flag);
  if (process.env.ANET_DATA_DIR) return resolve(process.env.ANET_DATA_DIR);
  return join(homedir(), '.anet');
}
