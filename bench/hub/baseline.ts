// bench/hub's baseline: plain POSTs of 600 bytes to a node:http server in its own process answering 202,
// over a keep-alive agent, measured in the same run as each figure (./plain.ts is the server).
import { type Child, http, keepAlive, rate } from './common.js';

const BODY = Buffer.alloc(600, 1);

/** `n` POSTs one after another: their latencies (ms). */
export async function postLatencies(plain: Child, n: number): Promise<number[]> {
  const agent = keepAlive(1);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await http(agent, plain.url, 'POST', '/', BODY);
    out.push(performance.now() - t0);
  }
  agent.destroy();
  return out;
}

/** `n` POSTs, `concurrency` at once: requests/s and the server's CPU µs per request. */
export async function postRate(plain: Child, n: number, concurrency: number): Promise<{ perSec: number; cpuUs: number }> {
  const agent = keepAlive(concurrency);
  await rate(Math.min(n, 200), concurrency, () => http(agent, plain.url, 'POST', '/', BODY).then(() => {}));
  const cpu0 = await plain.cpu();
  const perSec = await rate(n, concurrency, () => http(agent, plain.url, 'POST', '/', BODY).then(() => {}));
  const cpuUs = ((await plain.cpu()) - cpu0) / n;
  agent.destroy();
  return { perSec, cpuUs };
}
