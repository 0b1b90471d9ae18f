// PNG files of an exact size, for tests that send files (the node detects image/png from the bytes).
import { randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';

/** One PNG chunk: length, type, data, CRC-32 of type and data. */
const chunk = (type: string, data: Buffer) => {
  const head = Buffer.alloc(4);
  head.writeUInt32BE(data.length);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([Buffer.from(type, 'latin1'), data])));
  return Buffer.concat([head, Buffer.from(type, 'latin1'), data, crc]);
};

/** A PNG of exactly `size` bytes: signature, IHDR, one IDAT of `filler` (random by default), IEND. */
export function png(size: number, filler?: (n: number) => Buffer): Buffer {
  const ihdr = Buffer.from('00000400000003000802000000', 'hex'); // 1024 × 768, 8-bit truecolor
  const n = size - 8 - (12 + ihdr.length) - 12 - 12;
  return Buffer.concat([
    Buffer.from('89504e470d0a1a0a', 'hex'),
    chunk('IHDR', ihdr),
    chunk('IDAT', filler ? filler(n) : randomBytes(n)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}
