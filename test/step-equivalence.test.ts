// SPEC §14: replay is exact only if the host's direct pure step (src/runtime/flat-step.ts) gives exactly
// xstate's transition() for every machine the host runs — call, payment, spend, buckets, in-flight,
// card-fetch — and the journal decoder decodes as the codec does. The property check lives in
// bench/step-equivalence.ts (run there with more cases); here it runs on every `npm test`.
import test from 'ava';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { KINDS } from '../src/runtime/kinds.js';

const SCRIPT = fileURLToPath(new URL('../dist/bench/step-equivalence.js', import.meta.url));

test('SPEC §14: for every machine kind, the direct pure step equals xstate transition() over random event sequences; the journal decoder equals the codec', async (t) => {
  const { code, out } = await new Promise<{ code: number; out: string }>((resolve) => {
    execFile(process.execPath, [SCRIPT, '300'], (err, stdout, stderr) => resolve({ code: err ? 1 : 0, out: stdout + stderr }));
  });
  t.is(code, 0, out);
  t.regex(out, /journal decoder: \d+ random values decode as the codec decodes them/);
  for (const kind of Object.keys(KINDS)) t.regex(out, new RegExp(`^${kind}: 300 runs, pure step == xstate transition\\(\\)`, 'm'), `${kind} is checked`);
});
