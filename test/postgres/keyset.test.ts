// SPEC §11, WIRE §4 on the PostgreSQL storage (issue 19): every test of test/keyset.test.ts (encryption key
// sets published to the hub), its hubs on a throwaway PostgreSQL instead of the embedded LevelDB.
import '../helpers/on-postgres.js';
import '../keyset.test.js';
