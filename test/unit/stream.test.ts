// PROTOCOL §6.10, GUIDE §9: a live stream of updates (SSE, NDJSON) whose client stops reading is cut off
// once MAX_UNREAD_BYTES wait unread, instead of being buffered without end.
import test from 'ava';
import { Writable } from 'node:stream';
import { MAX_UNREAD_BYTES, writeUpdate } from '../../src/util/stream.js';

test('PROTOCOL §6.10: updates to a client that reads nothing are buffered up to 4 MiB (MAX_UNREAD_BYTES), then the stream is destroyed', (t) => {
  // A client that never takes a byte: every write stays in the stream's buffer.
  const stalled = new Writable({ write: () => {} });
  stalled.on('error', () => {});
  const line = `${'x'.repeat(16 * 1024)}\n`;
  let written = 0;
  while (!stalled.destroyed && written < 4 * MAX_UNREAD_BYTES) {
    writeUpdate(stalled, line);
    written += line.length;
  }
  t.true(stalled.destroyed, 'cut off');
  t.true(written > MAX_UNREAD_BYTES && written <= MAX_UNREAD_BYTES + 2 * line.length, `cut off after ${written} bytes`);
  t.notThrows(() => writeUpdate(stalled, line), 'a write after the cut is dropped');
});

test('PROTOCOL §6.10: a client that reads keeps its stream however much goes through it', (t) => {
  const reading = new Writable({ write: (_c, _e, done) => done() });
  const line = `${'x'.repeat(16 * 1024)}\n`;
  for (let i = 0; i < 4 * (MAX_UNREAD_BYTES / line.length); i++) writeUpdate(reading, line);
  t.false(reading.destroyed);
});

test('PROTOCOL §6.10: a result of the largest size (1 MiB of JSON) and the status after it never cut off a client that reads', (t) => {
  // Just after a write its bytes still count as unread: the largest update must fit under the bound twice.
  const slow = new Writable({ write: () => {} });
  writeUpdate(slow, 'x'.repeat(1024 * 1024 + 4096));
  writeUpdate(slow, 'final status');
  t.false(slow.destroyed);
});
