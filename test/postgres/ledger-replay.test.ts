// SPEC §11 on the PostgreSQL storage (issue 19): every test of test/ledger-replay.test.ts, its hub on a
// throwaway PostgreSQL (where the nonce is claimed inside the op's transaction).
import '../helpers/on-postgres.js';
import '../ledger-replay.test.js';
