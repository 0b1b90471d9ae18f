// The layers of docs/ARCHITECTURE.md ("Layers"), checked by dependency-cruiser with
// .dependency-cruiser.cjs: the tree as it is has no violation, and the check does fail on what it
// exists to stop — an upward import, a circle, the protocol reaching past identity, a surface using
// another's code, the node importing the hub — shown on a copy of the tree with one such import added.
import test from 'ava';
import { execFile } from 'node:child_process';
import { cp, appendFile, symlink, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir } from './helpers/tmp.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CRUISE = join(ROOT, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');

function cruise(cwd: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [CRUISE, 'src', 'machines', 'store', '--output-type', 'err'],
      { cwd, maxBuffer: 8 << 20 },
      (err, stdout, stderr) => resolve({ code: err ? 1 : 0, out: stdout + stderr }),
    );
  });
}

/** A copy of the tree's sources and the check's config, to break on purpose. */
async function copyOfTree(dir: string): Promise<void> {
  for (const part of ['src', 'machines', 'store', 'tsconfig.json', '.dependency-cruiser.cjs'])
    await cp(join(ROOT, part), join(dir, part), { recursive: true });
  await symlink(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
}

test('layers: the tree has no upward import, no circle, and the node does not import the hub', async (t) => {
  const { code, out } = await cruise(ROOT);
  t.is(code, 0, out);
  t.regex(out, /no dependency violations found/);
});

const BREAKS: { title: string; file: string; line: string; rule: RegExp }[] = [
  {
    title: 'an upward import (the wire layer importing the node)',
    file: 'src/protocol/messages.ts',
    line: "import '../node/node.js';",
    rule: /layer: wire and crypto imports upward: src\/protocol\/messages\.ts → src\/node\/node\.ts/,
  },
  {
    title: 'an upward import (the runtime importing a role)',
    file: 'src/runtime/clock.ts',
    line: "import '../node/provider/calls.js';",
    rule: /layer: store and runtime imports upward: src\/runtime\/clock\.ts → src\/node\/provider\/calls\.ts/,
  },
  { title: 'a circle', file: 'src/util/random.ts', line: "import './fsutil.js';", rule: /no-circular: src\/util\/(random|fsutil)\.ts → / },
  {
    title: 'the protocol importing past identity',
    file: 'src/protocol/relay.ts',
    line: "import '../runtime/clock.js';",
    rule: /protocol imports only identity: src\/protocol\/relay\.ts → src\/runtime\/clock\.ts/,
  },
  {
    title: "a surface using another surface's code",
    file: 'src/mcp/tools.ts',
    line: "import '../cli/output.js';",
    rule: /surfaces do not share code: src\/mcp\/tools\.ts → src\/cli\/output\.ts/,
  },
  {
    title: 'the provider importing the caller',
    file: 'src/node/provider/reply.ts',
    line: "import '../caller/records.js';",
    rule: /the roles do not import each other: src\/node\/provider\/reply\.ts → src\/node\/caller\/records\.ts/,
  },
  {
    title: 'the node importing the hub',
    file: 'src/card/build.ts',
    line: "import '../hub/ledger.js';",
    rule: /the node never imports the hub: src\/card\/build\.ts → src\/hub\/ledger\.ts/,
  },
];

// All the breaks go into one copy and one run (each in its own file, so each is reported on its own):
// a cruise costs seconds, and the report lists every violation.
test('layers: the check fails on each kind of break it exists to stop', async (t) => {
  const dir = await tempDir(t, 'anet-layers-');
  await copyOfTree(dir);
  // The circle needs both directions: fsutil → random is added too, whatever the tree has now.
  await appendFile(join(dir, 'src/util/fsutil.ts'), "\nimport './random.js';\n");
  for (const b of BREAKS) await appendFile(join(dir, b.file), `\n${b.line}\n`);
  // A folder outside every layer: the check must see it rather than let it import anything.
  await mkdir(join(dir, 'src/stray'));
  await writeFile(join(dir, 'src/stray/loose.ts'), "import '../node/node.js';\n");
  const { code, out } = await cruise(dir);
  t.is(code, 1, out);
  for (const b of BREAKS) t.regex(out, b.rule, `the check reports ${b.title}`);
  t.regex(out, /every module is in a layer: src\/stray\/loose\.ts → src\/node\/node\.ts/);
});
