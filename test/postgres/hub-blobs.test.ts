// Issue 20, PROTOCOL §8.11 on the PostgreSQL storage: every test of test/hub-blobs.test.ts (the blob
// routes, resumable uploads, the ack, the sweep, a hub killed mid-upload), its hubs on a throwaway
// PostgreSQL instead of the embedded LevelDB.
import '../helpers/on-postgres.js';
import '../hub-blobs.test.js';
