// What a bench/hub child process (./child.ts, ./plain.ts) answers over IPC: `cpu` (process.cpuUsage,
// every thread, µs), `mem` (after two full GCs) and `stop` (its own clean stop, then exit).
const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});

export function answerBench(stop: () => Promise<void>): void {
  // The bench gone (killed, or crashed): no child outlives it.
  process.once('disconnect', () => process.exit(0));
  process.on('message', (m: { cmd: string }) => {
    if (m.cmd === 'cpu') {
      const c = process.cpuUsage();
      process.send!({ cmd: 'cpu', value: c.user + c.system });
    } else if (m.cmd === 'mem') {
      gc();
      gc();
      const { rss, heapUsed, external, arrayBuffers } = process.memoryUsage();
      process.send!({ cmd: 'mem', value: { rss, heapUsed, external, arrayBuffers } });
    } else if (m.cmd === 'stop') {
      void stop().finally(() => process.exit(0));
    }
  });
}
