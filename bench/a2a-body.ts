// bench/a2a-body: how long the event loop is held up while the local A2A endpoint parses one large request
// body (SPEC §12), parsed in a worker thread (src/a2a/parse.ts) against the same body parsed in line (what
// the endpoint did before, the baseline), in the same run. The longest gap between 1 ms ticks is what any
// other request to the node waits at worst. Target (issue "A2A endpoint ... stalls"): a body with a large
// file part holds the loop up at most a tenth as long as in line. A body of millions of numbers is shown
// too: rebuilding its values on the main thread costs about as much as parsing them there.
import { BodyParser, parseInline } from '../src/a2a/parse.js';

/** Runs `work`, ticking every 1 ms meanwhile (and 50 ms after, to see a last synchronous stretch): the longest gap and the time taken. */
async function gaps(work: () => unknown): Promise<{ gap: number; ms: number }> {
  let last = performance.now();
  let gap = 0;
  const tick = setInterval(() => {
    const now = performance.now();
    gap = Math.max(gap, now - last);
    last = now;
  }, 1);
  await new Promise((r) => setTimeout(r, 20));
  const t0 = performance.now();
  await work();
  const ms = performance.now() - t0;
  await new Promise((r) => setTimeout(r, 50));
  clearInterval(tick);
  return { gap, ms };
}

const request = (args: string) =>
  Buffer.from(
    `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[${args}]}}}`,
  );

export async function benchA2aBody(mib: number): Promise<boolean> {
  const parser = new BodyParser();
  const raw = Buffer.alloc(Math.floor((mib * 1024 * 1024 * 3) / 4), 7).toString('base64');
  const numbers = Array.from({ length: Math.floor((mib * 1024 * 1024) / 6) }, (_, i) => `${i % 1000}.5`).join(',');
  const bodies = [
    {
      label: `a ${mib} MiB file part`,
      body: request(`{"data":{"capability":"c","args":{}}},{"raw":"${raw}","filename":"f.bin"}`),
      target: true,
    },
    { label: `${mib} MiB of numbers`, body: request(`{"data":{"capability":"c","args":{"n":[${numbers}]}}}`), target: false },
  ];
  console.log(`bench/a2a-body (node ${process.version}): the longest event-loop gap while one request body is parsed`);
  let ok = true;
  for (const { label, body, target } of bodies) {
    const inline = await gaps(() => parseInline(body));
    const worker = await gaps(() => parser.parse(Buffer.from(body)));
    const ratio = worker.gap / inline.gap;
    const met = !target || ratio <= 0.1;
    ok = ok && met;
    console.log(
      `${`baseline: ${label}, in line`.padEnd(44)} gap ${inline.gap.toFixed(0).padStart(5)} ms  parsed in ${inline.ms.toFixed(0).padStart(5)} ms  1.00x`,
    );
    console.log(
      `${`${label}, in a worker`.padEnd(44)} gap ${worker.gap.toFixed(0).padStart(5)} ms  parsed in ${worker.ms.toFixed(0).padStart(5)} ms  ${ratio.toFixed(3)}x  ${target ? `target ≤ 0.1x ${met ? 'ok' : 'MISSED'}` : '(no target)'}`,
    );
  }
  await parser.close();
  return ok;
}
