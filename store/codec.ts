// msgpackr for the local store only: compact and fast, keeps bigint amounts exact. It is not canonical,
// so nothing encoded here is ever signed or hashed for anything another party checks (WIRE.md §1). The
// journal's and the ledger history's hash chains (store/chain.ts, src/hub/ledger.ts) hash these bytes
// exactly as stored, never re-encoded: a local check that our own stored bytes are the ones we wrote.
import { Packr } from 'msgpackr';

const packr = new Packr({ useRecords: false });

export const msgpack = {
  name: 'msgpackr',
  format: 'buffer' as const,
  encode: (value: unknown): Buffer => packr.pack(value),
  decode: (buffer: Buffer): unknown => packr.unpack(buffer),
};

export const pack = (value: unknown): Buffer => packr.pack(value);
export const unpack = (buffer: Uint8Array): unknown => packr.unpack(buffer);
