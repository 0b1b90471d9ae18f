// SPEC §11 on the PostgreSQL storage (issue 19): every test of test/ledger.test.ts, its hubs on a throwaway
// PostgreSQL instead of the embedded LevelDB (tests of LevelDB's own bytes stay on the embedded run).
import '../helpers/on-postgres.js';
import '../ledger.test.js';
