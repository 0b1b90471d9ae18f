// The hub tests' one way to start a hub, so one suite runs on both storage backends (issue 19): the
// embedded LevelDB by default, or PostgreSQL when the test file is one of the test/postgres/ wrappers
// (they import test/helpers/on-postgres.ts first, which sets ANET_TEST_HUB_DB). A hub restarted on the
// same data dir gets the same database, as a real replica restarted on the same `--db` would.
import { startHub, type Hub, type HubOptions } from '../../src/hub/server.js';
import { postgresUrl } from './postgres.js';

/** Which backend this test process runs its hubs on. */
export const hubBackend: 'leveldb' | 'postgres' = process.env.ANET_TEST_HUB_DB === 'postgres' ? 'postgres' : 'leveldb';

/** True on the embedded backend: for tests of LevelDB's own bytes (tampering, its lock, its files). */
export const onLevelDb = hubBackend === 'leveldb';

const databases = new Map<string, Promise<string>>();

/** The database of a hub data dir (made on first use). */
function databaseOf(dataDir: string): Promise<string> {
  let url = databases.get(dataDir);
  if (!url) {
    url = postgresUrl();
    databases.set(dataDir, url);
  }
  return url;
}

/** startHub on this process's backend. */
export async function startTestHub(opts: HubOptions): Promise<Hub> {
  if (hubBackend === 'leveldb' || opts.db !== undefined) return startHub(opts);
  return startHub({ ...opts, db: await databaseOf(opts.dataDir) });
}
