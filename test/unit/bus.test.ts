// The peer-message bus: bounded concurrency, bounded backlog, failures isolated.
import test from 'ava';
import { Bus, type PeerMessage } from '../../src/bus/bus.js';
import { until } from '../helpers/wait.js';

const msg = (i: number): PeerMessage => ({ from: `bafyrei${i}`, type: 'card.request', body: { i }, at: i });

test('SPEC §8, §14 (bus): never more handlers at once than its concurrency, and every message is delivered', async (t) => {
  const bus = new Bus({ concurrency: 4 });
  let running = 0;
  let peak = 0;
  const seen: number[] = [];
  let finish!: () => void;
  const allDone = new Promise<void>((r) => (finish = r));
  bus.start(async (m) => {
    running++;
    peak = Math.max(peak, running);
    // Each handler yields once: the bus has started all it may before the first one finishes.
    await new Promise((r) => setImmediate(r));
    seen.push((m.body as { i: number }).i);
    running--;
    if (seen.length === 50) finish();
  });
  for (let i = 0; i < 50; i++) t.true(bus.publish(msg(i)));
  await allDone;
  // The last handler's promise settles (and is counted) after it returns.
  await until(() => bus.stats.delivered === 50, 'fifty messages counted delivered');
  t.is(peak, 4);
  t.deepEqual(
    [...seen].sort((a, b) => a - b),
    Array.from({ length: 50 }, (_, i) => i),
  );
  t.is(bus.stats.delivered, 50);
  bus.stop();
});

test('SPEC §8, §14 (bus): a full backlog refuses new messages; a failing handler does not stop the stream', async (t) => {
  const errors: unknown[] = [];
  const bus = new Bus({ concurrency: 1, maxBacklog: 3, onError: (e) => errors.push(e) });
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const handled: number[] = [];
  bus.start(async (m) => {
    const i = (m.body as { i: number }).i;
    if (i === 0) await gate;
    if (i === 1) throw new Error('boom');
    handled.push(i);
  });
  const accepted = [0, 1, 2, 3, 4, 5].map((i) => bus.publish(msg(i)));
  t.deepEqual(accepted, [true, true, true, true, false, false]);
  t.is(bus.stats.dropped, 2);
  release();
  // Handlers run one at a time, in order: once 2 and 3 are counted, 1 has failed before them. A marker
  // published then comes after anything still in the stream, so 4 and 5, had they got in, show before it.
  await until(() => bus.stats.delivered >= 3, 'the accepted messages that do not fail');
  t.true(bus.publish(msg(6)));
  await until(() => handled.includes(6), 'the marker');
  t.deepEqual(handled, [0, 2, 3, 6]);
  t.is(errors.length, 1);
  t.is(bus.stats.failed, 1);
  t.throws(() => new Bus().publish(msg(9)), { message: /not started/ });
  bus.stop();
});
