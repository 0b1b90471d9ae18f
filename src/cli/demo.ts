// `anet demo` (what `npm start` runs): a guided tour in a temporary directory that cleans up after itself.
import { mkdtemp, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from './main.js';
import { startSampleService, echoHandler, reverseHandler, type SampleService } from '../service/sample.js';
import type { Io } from './output.js';

export async function cmdDemo(io: Io): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), 'anet-demo-'));
  const services: SampleService[] = [];
  const cleanup = async () => {
    await Promise.all(services.map((s) => s.close()));
    await rm(root, { recursive: true, force: true });
  };
  const onSignal = () => void cleanup().then(() => process.exit(130));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    await tour(io, root, services);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await cleanup();
  }
}

async function run(io: Io, args: string[], expectExit = 0): Promise<void> {
  io.out(`\n$ anet ${args.join(' ')}`);
  const indent = (text: string) => io.out(text.replace(/^/gm, '  '));
  const code = await main(args, { out: indent, err: indent });
  if (code !== expectExit) throw new Error(`demo step \`anet ${args.join(' ')}\` exited ${code}, expected ${expectExit}`);
}

async function tour(io: Io, root: string, services: SampleService[]): Promise<void> {
  const data = join(root, 'node-a');
  const sockets = join(root, 'run');
  await mkdir(sockets, { mode: 0o700 });
  io.out(`ANet demo in ${root} (removed at the end)`);
  io.out('1. A node is an identity: an Ed25519 key with a pre-rotated next key, written to a key event log.');
  await run(io, ['init', '--data', data]);
  await run(io, ['id', '--data', data, '--json']);

  io.out('\n2. Capabilities are local programs on Unix sockets. Two sample services start, and config.json offers them.');
  services.push(await startSampleService(join(sockets, 'echo.sock'), echoHandler));
  services.push(await startSampleService(join(sockets, 'reverse.sock'), reverseHandler));
  await writeFile(join(data, 'config.json'), demoConfig(sockets));
  await run(io, ['doctor', '--data', data]);

  io.out('\n3. A typo never silently weakens a limit: doctor names the path and the likely key.');
  await writeFile(join(data, 'config.json'), demoConfig(sockets).replace('"per_caller_per_min"', '"per_caler_per_min"'));
  await run(io, ['doctor', '--data', data], 1);
  await writeFile(join(data, 'config.json'), demoConfig(sockets));

  io.out('\n4. Rotating the key keeps the AID; the KEL proves the new key was committed to in advance.');
  await run(io, ['key', 'rotate', '--data', data]);
  await run(io, ['id', '--data', data]);
  const kelFile = join(root, 'kel.hex');
  await run(io, ['kel', 'export', kelFile, '--hex', '--data', data]);
  await run(io, ['kel', 'verify', kelFile]);
  io.out('\nDemo finished.');
}

function demoConfig(sockets: string): string {
  return JSON.stringify(
    {
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
