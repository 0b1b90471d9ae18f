// SPEC §11 on the PostgreSQL storage (issue 19): every test of test/hostile/hub.test.ts (a hostile client
// against the hub), its hubs on a throwaway PostgreSQL instead of the embedded LevelDB.
import '../helpers/on-postgres.js';
import '../hostile/hub.test.js';
