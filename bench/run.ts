// `npm run bench [-- runtime|step|relay|calls|a2a-body|hub|files] [-- --quick]`: runs the benchmarks and prints figures with their ratios.
import { benchRuntime } from './runtime.js';
import { benchStep } from './step.js';
import { benchRelay } from './relay.js';
import { benchCalls } from './calls.js';
import { benchA2aBody } from './a2a-body.js';
import { benchHub } from './hub.js';
import { benchFiles } from './files.js';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const which = args.filter((a) => !a.startsWith('--'));
const all = which.length === 0;

let ok = true;
if (all || which.includes('runtime')) {
  ok =
    (await benchRuntime(
      quick ? { events: 20_000, buckets: 10_000, restoreEvents: 50_000 } : { events: 200_000, buckets: 100_000, restoreEvents: 1_000_000 },
    )) && ok;
}
if (all || which.includes('step')) ok = benchStep(quick ? 100_000 : 500_000) && ok;
if (all || which.includes('relay')) ok = (await benchRelay(quick ? 200 : 2000)) && ok;
if (all || which.includes('calls')) ok = (await benchCalls(quick ? 300 : 2000, quick ? 1 : 3)) && ok;
if (all || which.includes('a2a-body')) ok = (await benchA2aBody(quick ? 8 : 30)) && ok;
// Several minutes (100k agents on two backends): only when named.
if (which.includes('hub')) ok = (await benchHub({ quick })) && ok;
// Files of 64 MiB through separate processes (about 2 minutes): only when named.
if (which.includes('files')) ok = (await benchFiles({ quick })) && ok;
process.exitCode = ok ? 0 : 1;
