// SPEC §11, WIRE §4 on the PostgreSQL storage (issue 19): every test of test/mailbox.test.ts (durable
// mailboxes, acknowledgements), its hubs on a throwaway PostgreSQL instead of the embedded LevelDB.
import '../helpers/on-postgres.js';
import '../mailbox.test.js';
