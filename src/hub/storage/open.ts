// Which storage a hub runs on: the embedded LevelDB in its data dir (the default), or the PostgreSQL a
// `--db postgres://…` names (shared by replicas). The PostgreSQL client is loaded only when asked for, so
// a hub on the embedded default loads none of it.
import type { HubStorage } from './types.js';
import { openLevelStorage } from './level.js';

/** A `--db` that is not a PostgreSQL URL. */
export class BadDatabaseUrl extends Error {
  override name = 'BadDatabaseUrl';
}

export async function openStorage(dataDir: string, db?: string): Promise<HubStorage> {
  if (db === undefined) return openLevelStorage(dataDir);
  if (!/^postgres(ql)?:\/\/./.test(db))
    throw new BadDatabaseUrl(`--db takes a PostgreSQL URL (postgres://user:password@host:5432/database), not "${db}"`);
  const { openPostgresStorage } = await import('./postgres.js');
  return openPostgresStorage(db);
}
