// A seal must never hang the process: on Node 20, exporting a key fresh from generateKeyPairSync as a JWK
// holds the key's mutex while it allocates, and a GC there that collects the generating job locks the same
// mutex again from the same thread (gdb: ~KeyGenJob under ExportJWKEdKey), a hang for good with no CPU used.
// bench/hub's sender hung so in about one run in twenty. A child with a tiny young generation (a GC every
// few hundred seals) seals until the deadline: before the fix it hung within a few thousand seals. Seals
// now make their keys through libsodium (src/util/sodium.ts), with no OpenSSL key object at all; the test
// stays, so a return to key objects cannot bring the hang back unseen.
import test from 'ava';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const HPKE = fileURLToPath(new URL('../../src/protocol/hpke.ts', import.meta.url));
const SEALS = 30_000;

test('WIRE §4: sealing an envelope never deadlocks when a GC collects the job of the ephemeral key being exported', async (t) => {
  t.timeout(120_000);
  const script = `
    const { seal, generateX25519 } = await import(${JSON.stringify(HPKE)});
    const me = generateX25519();
    const info = new TextEncoder().encode('info');
    for (let i = 0; i < ${SEALS}; i++) seal(me.publicKey, info, new Uint8Array(), new Uint8Array(64));
    console.log('sealed');`;
  const child = spawn(process.execPath, ['--max-semi-space-size=1', '--import', 'tsx', '--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  // A deadlocked main thread answers nothing: only SIGKILL ends it.
  const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  clearTimeout(timer);
  t.is(code, 0, `the sealing child ${code === null ? 'hung (killed after 90 s)' : `exited ${code}`}`);
  t.regex(out, /sealed/);
});
