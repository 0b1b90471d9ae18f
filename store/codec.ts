// msgpackr for the local store only: compact and fast, keeps bigint amounts exact. It is not canonical,
// so nothing encoded here is ever hashed or signed (WIRE.md §1).
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
