// `anet demo` (what `npm start` runs): a guided tour in a temporary directory that cleans up after itself.
// It runs `anet` commands through the CLI's main(), which the CLI hands in (importing it here would make
// main.ts and this file one module); the hub comes from src/hub/main.ts, loaded when the tour starts.
import { mkdtemp, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSampleService, echoHandler, reverseHandler, type SampleService } from '../service/sample.js';
import type { Io } from './output.js';
import { loadIdentity } from '../identity/store.js';
import { startDaemon } from '../daemon/daemon.js';

/** The CLI's main(): runs one `anet` command, its lines to `io`; the exit code. */
export type RunCommand = (argv: string[], io: Io) => Promise<number>;

export async function cmdDemo(io: Io, main: RunCommand): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), 'anet-demo-'));
  const services: SampleService[] = [];
  const cleanups: (() => Promise<void>)[] = [];
  let cleaned = false;
  const cleanup = async () => {
    if (cleaned) return;
    cleaned = true;
    await Promise.all([...services.map((s) => s.close()), ...cleanups.map((c) => c())]);
    await rm(root, { recursive: true, force: true });
  };
  const onSignal = () => void cleanup().then(() => process.exit(130));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    await tour(io, main, root, services, cleanups);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await cleanup();
  }
}

async function run(io: Io, main: RunCommand, args: string[], expectExit = 0): Promise<void> {
  io.out(`\n$ anet ${args.join(' ')}`);
  const indent = (text: string) => io.out(text.replace(/^/gm, '  '));
  const code = await main(args, { out: indent, err: indent });
  if (code !== expectExit) throw new Error(`demo step \`anet ${args.join(' ')}\` exited ${code}, expected ${expectExit}`);
}

async function tour(io: Io, main: RunCommand, root: string, services: SampleService[], cleanups: (() => Promise<void>)[]): Promise<void> {
  const a = join(root, 'translator');
  const b = join(root, 'reader');
  const sockets = join(root, 'run');
  await mkdir(sockets, { mode: 0o700 });
  io.out(`ANet demo in ${root} (removed at the end)`);

  io.out('\n1. A hub: a directory of signed public cards and a store of key event logs (KELs).');
  const { startHub } = await import('../hub/main.js');
  const hub = await startHub({ dataDir: join(root, 'hub'), port: 0 });
  cleanups.push(() => hub.close());
  io.out(`  hub ready on ${hub.url}`);

  io.out('\n2. A node is an identity: an Ed25519 key with a pre-rotated next key, in a KEL; the AID names it.');
  await run(io, main, ['init', '--data', a]);
  const aid = (await loadIdentity(a)).aid;

  io.out('\n3. Capabilities are local programs on Unix sockets. Two sample services start; config.json offers them.');
  services.push(await startSampleService(join(sockets, 'echo.sock'), echoHandler));
  services.push(await startSampleService(join(sockets, 'reverse.sock'), reverseHandler));
  await writeFile(join(a, 'config.json'), demoConfig(hub.url, sockets));
  await run(io, main, ['doctor', '--data', a]);

  io.out('\n4. A typo never silently weakens a limit: doctor names the path and the likely key.');
  await writeFile(join(a, 'config.json'), demoConfig(hub.url, sockets).replace('"per_caller_per_min"', '"per_caler_per_min"'));
  await run(io, main, ['doctor', '--data', a], 1);
  await writeFile(join(a, 'config.json'), demoConfig(hub.url, sockets));

  io.out('\n5. The node signs its public card (no prices on it: they go on extended cards) and registers it.');
  await run(io, main, ['hub-register', '--name', 'translator', '--data', a]);
  io.out("  (the translator's daemon now runs: it opens its relay stream and answers card requests)");
  const daemon = await startDaemon(a, () => {});
  await daemon.published;
  let daemonRunning = true;
  const stopDaemon = async () => {
    if (daemonRunning) await daemon.close();
    daemonRunning = false;
  };
  cleanups.push(stopDaemon);

  io.out('\n6. Another node searches the directory. It contacts only the hub, and checks every card against its KEL.');
  await run(io, main, ['init', '--data', b]);
  await writeFile(join(b, 'config.json'), JSON.stringify({ hub: hub.url }));
  await run(io, main, ['find', 'reverse', '--data', b]);
  io.out('\n7. The card says some skills are paid, so viewing it contacts the agent, end to end encrypted through');
  io.out('   the hub relay: the prices come signed by the agent itself, and the hub cannot read them.');
  await run(io, main, ['card', aid, '--data', b]);

  io.out("\n8. A call: the translator's node checks it (lists, quotas, arguments), runs its local program over the");
  io.out('   Unix socket, and returns the result with a receipt it signed; the reader verifies the receipt.');
  const reader = await startDaemon(b, () => {});
  cleanups.push(() => reader.close());
  await reader.published;
  const readerAid = (await loadIdentity(b)).aid;
  await run(io, main, ['call', aid, 'demo.echo', '--args', '{"hello":"world"}', '--data', b]);

  io.out("\n9. Credits live on the hub's ledger; its operator mints some for the reader.");
  await run(io, main, ['hub', 'mint', readerAid, '20', '--data', join(root, 'hub')]);

  io.out('\n10. A paid call. The translator quotes 3 credits, signed. The reader pays by itself because the quote is');
  io.out('    within the price the translator signed on its extended card (and within payments.auto_max and');
  io.out('    daily_max). The hub holds the amount, the program runs, the hub captures it: the receipt names both.');
  await run(io, main, ['call', aid, 'text.reverse', '--args', '{"text":"stressed"}', '--data', b]);
  await run(io, main, ['balance', '--data', b]);

  io.out('\n11. The audit: which signed price each payment was checked against, and every card version seen.');
  await run(io, main, ['audit', 'prices', aid, '--data', b]);

  io.out('\n12. Rotating the key keeps the AID; the next card is signed with the new key, and readers follow the KEL.');
  await stopDaemon();
  await run(io, main, ['key', 'rotate', '--data', a]);
  await run(io, main, ['find', '--data', b]);
  const kelFile = join(root, 'kel.hex');
  await run(io, main, ['kel', 'export', kelFile, '--hex', '--data', a]);
  await run(io, main, ['kel', 'verify', kelFile]);
  io.out('\nDemo finished.');
}

function demoConfig(hub: string, sockets: string): string {
  return JSON.stringify(
    {
      hub,
      inbound: {
        policy: 'open',
        public_capabilities: [{ id: 'demo.echo', per_caller_per_min: 30 }, { id: 'text.reverse' }],
      },
      modules: {
        service: {
          capabilities: [
            { id: 'demo.echo', url: `unix://${sockets}/echo.sock`, description: 'Echo the arguments back.' },
            { id: 'text.reverse', url: `unix://${sockets}/reverse.sock`, price: 3, description: 'Reverse a text.' },
          ],
        },
      },
    },
    null,
    2,
  );
}
