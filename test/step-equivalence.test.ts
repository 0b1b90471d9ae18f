// SPEC §14: replay is exact only if the host's pure step (src/runtime/pure.ts, with its fast path
// src/runtime/flat-step.ts) and replay's rebuild (src/runtime/rebuild.ts) give exactly xstate's
// transition() for every machine the host runs — call, payment, spend, buckets, in-flight, card-fetch —
// and the journal decoder (src/runtime/journal-decode.ts) decodes as the codec does.
// The property check lives in bench/step-equivalence.ts (run there with more cases); here it runs on
// every `npm test`, on the source (through tsx), so `npx ava` after an edit checks the edited code.
import test from 'ava';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { KINDS } from '../src/runtime/kinds.js';

const SCRIPT = fileURLToPath(new URL('../bench/step-equivalence.ts', import.meta.url));

test("SPEC §14: for every machine kind, the pure step and replay's rebuild equal xstate transition() over random event sequences; the journal decoder equals the codec", async (t) => {
  t.timeout(120_000);
  const { code, out } = await new Promise<{ code: number; out: string }>((resolve) => {
    execFile(process.execPath, ['--import=tsx', SCRIPT, '300'], (err, stdout, stderr) =>
      resolve({ code: err ? 1 : 0, out: stdout + stderr }),
    );
  });
  t.is(code, 0, out);
  t.regex(out, /journal decoder: \d+ random values decode as the codec decodes them/);
  for (const kind of Object.keys(KINDS))
    t.regex(out, new RegExp(`^${kind}: 300 runs, pure step == xstate transition\\(\\)`, 'm'), `${kind} is checked`);
});
