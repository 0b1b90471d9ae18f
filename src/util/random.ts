// The project's random ids (envelope mids, task ids, request and payment nonces, quote and transaction
// ids; not key material), served from a pooled buffer as node's own randomUUID does: each randomBytes()
// is a native call into OpenSSL of about 7 µs here, and a call drew four; one 4 KiB fill serves
// hundreds. The bytes are the same CSPRNG's, and each byte is handed out once.
import { randomFillSync } from 'node:crypto';

const POOL_BYTES = 4096;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let used = POOL_BYTES;

/** `n` (at most 256) fresh random bytes, in a buffer of their own. */
export function randomId(n: number): Buffer {
  if (n > 256) throw new Error('randomId serves at most 256 bytes');
  if (used + n > POOL_BYTES) {
    randomFillSync(pool);
    used = 0;
  }
  const out = Buffer.from(pool.subarray(used, used + n));
  // Never handed out twice, even if a caller keeps a view of the pool by mistake.
  pool.fill(0, used, used + n);
  used += n;
  return out;
}

/** `n` random bytes as lowercase hex. */
export const randomHex = (n: number): string => randomId(n).toString('hex');
