// The measuring loop of bench/calls, shared by the bench's process (anet's caller) and the baseline
// clients' processes (bench/calls/client.ts), so that every subject is timed the same way.

/** The arguments of every echo call, in all three subjects. */
export const ECHO_ARGS = { text: 'x'.repeat(200) };

export interface Measured {
  perSec: number;
  /** Each call's time, ms. */
  latencies: number[];
}

/** Makes `n` calls, `atOnce` of them running at a time. */
export async function runCalls(n: number, atOnce: number, one: () => Promise<unknown>): Promise<Measured> {
  const latencies: number[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: atOnce }, async () => {
      while (next++ < n) {
        const s = performance.now();
        await one();
        latencies.push(performance.now() - s);
      }
    }),
  );
  return { perSec: n / ((performance.now() - t0) / 1000), latencies };
}
