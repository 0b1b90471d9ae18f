// SPEC §11 (the hub keeps blobs, issue 20): the hub collects V8's young generation after every 8 MiB of
// upload bytes read from sockets, so the dead 64 KiB read buffers go at once rather than piling up until a
// full mark-compact (src/util/young-gc.ts says what it cost).
import test from 'ava';
import { PerformanceObserver, constants } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { youngGcEvery } from '../../src/util/young-gc.js';

test('SPEC §11: a collection runs once every `every` bytes noted, and never between', (t) => {
  const runs: string[] = [];
  const young = youngGcEvery(100, (o) => runs.push(`${o.type} ${o.execution}`));
  young.note(60);
  young.note(39);
  t.deepEqual(runs, [], 'under 100 bytes: none');
  young.note(1);
  t.deepEqual(runs, ['minor sync'], 'at 100: the young generation, at once');
  young.note(250);
  t.is(young.runs, 2, 'one for a note of many bytes: the count starts again after each');
  young.note(99);
  t.is(young.runs, 2);
});

test('SPEC §11: the real collector frees the ArrayBuffers nothing holds', async (t) => {
  const held = () => process.memoryUsage().arrayBuffers;
  const MIB = 1 << 20;
  // A full collection first, so that none is marking while the buffers are made: buffers made during a
  // full collection's marking survive it and are promoted, and no young collection frees them (this test
  // failed about one run in twenty without it).
  setFlagsFromString('--expose-gc');
  (runInNewContext('gc') as () => void)();
  // 24 MiB of buffers as socket reads leave them: each its own ArrayBuffer, unreachable once read (under
  // the 32 MiB of young buffers at which V8 itself would collect).
  (() => {
    for (let i = 0; i < 24; i++) Buffer.allocUnsafeSlow(MIB).fill(1);
  })();
  const before = held();
  t.true(before >= 24 * MIB, `the buffers are counted before: ${before}`);
  const kinds: number[] = [];
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) kinds.push((e as PerformanceEntry & { detail: { kind: number } }).detail.kind);
  });
  observer.observe({ entryTypes: ['gc'] });
  const young = youngGcEvery(MIB);
  young.note(MIB);
  t.is(young.runs, 1);
  // The young buffers' memory is swept just after the collection, on a helper thread.
  for (let i = 0; i < 100 && held() > before - 16 * MIB; i++) await sleep(20);
  t.true(held() <= before - 16 * MIB, `freed: ${before} bytes before, ${held()} after`);
  // A full collection would free them too: the observer (its entries come a turn later) saw a young one.
  await sleep(20);
  observer.disconnect();
  t.true(kinds.includes(constants.NODE_PERFORMANCE_GC_MINOR), `collections seen (kinds): ${kinds.join(' ')}`);
});
