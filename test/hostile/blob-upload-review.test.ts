// Hostile review of the blob upload's PUT through node:http (src/hub-client/blobs.ts, putChunks), PROTOCOL
// §8.11. Checked against real local servers and found sound, so not here: an early refusal or 409 ends the
// upload and closes the file's readers; a hub that never reads, never answers, or stops mid-answer (hanging
// or closing) is dropped by the stall and the promise settles; the caller's abort (before or during the PUT)
// stops it with no retry; a file that shrinks fails as "changed while it was read"; a resume after a cut
// connection from an offset inside a sealed chunk (64 KiB, 128 KiB and 1 MiB chunks) sends exactly the
// rest with the right Content-Length and completes; no unhandled rejection when the hub resets after answering.
import test from 'ava';
import { execFile, execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer as createTlsServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import { sealedSize } from '../../src/protocol/blob-seal.js';

const MIB = 1024 * 1024;

const hasOpenssl = (() => {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();
if (!hasOpenssl && process.env.CI !== 'true')
  console.log('openssl not found: the https upload review test did not run; install it with `sudo apt-get install -y openssl`');

// Found by review, fixed (putChunks reads the scheme with new URL). It was: the PUT picked node:https only when the URL starts with
// the exact text "https:". The config check (src/config/check.ts isHttpUrl, `new URL(text).protocol`) accepts
// a hub written "HTTPS://…" (or with a leading space), and every other hub call (fetch, new URL) accepts it
// too, the upload's own status check included; but node:http's request() is then given an https URL and
// throws ERR_INVALID_PROTOCOL. That error is wrapped as HubUnreachableError, a transient error: with the
// default backoff a node whose hub is configured so retries for about four minutes and then fails every
// `--file` call with "cannot reach the hub", although the hub is up and answering. Before the change (fetch)
// the upload worked.
(hasOpenssl || process.env.CI === 'true' ? test : test.skip)(
  'PROTOCOL §8.11 review: an upload to a hub configured as "HTTPS://…" (accepted by the config check) goes over TLS, as its status check does',
  async (t) => {
    t.timeout(20_000);
    const dir = await mkdtemp(join(tmpdir(), 'anet-tls-review-'));
    t.teardown(() => rm(dir, { recursive: true, force: true }));
    const [key, cert] = [join(dir, 'key.pem'), join(dir, 'cert.pem')];
    execFileSync(
      'openssl',
      ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-subj', '/CN=127.0.0.1'].concat([
        '-addext',
        'subjectAltName=IP:127.0.0.1',
        '-keyout',
        key,
        '-out',
        cert,
      ]),
      { stdio: 'ignore' },
    );
    let statusChecks = 0;
    let got = 0;
    const server = createTlsServer({ key: await readFile(key), cert: await readFile(cert) }, (req, res) => {
      if (req.url?.endsWith('/status')) {
        statusChecks++;
        res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"code":"NO_BLOB","message":"none"}}');
        return;
      }
      req.on('data', (c: Buffer) => (got += c.length));
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"complete":true}'));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    t.teardown(() => {
      server.closeAllConnections();
      server.close();
    });
    // The scheme in capitals: the same URL to `new URL`, fetch and the config check.
    const url = `HTTPS://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const size = MIB + 1;
    const script = join(dir, 'upload.mts');
    await writeFile(
      script,
      `import { addressOf, uploadBlob } from ${JSON.stringify(fileURLToPath(new URL('../../src/hub-client/blobs.ts', import.meta.url)))};
const source = { size: ${size}, read: async function* (start: number) { if (start < ${size}) yield new Uint8Array(${size} - start).fill(7); } };
const key = new Uint8Array(32).fill(1);
try {
  await uploadBlob(${JSON.stringify(url)}, source, key, ${MIB}, await addressOf(source, key, ${MIB}), undefined, { backoffMs: [] });
  console.log('uploaded');
} catch (err) {
  console.log('failed: ' + (err as Error).message);
}`,
    );
    const out = await new Promise<string>((resolve, reject) =>
      execFile(
        process.execPath,
        ['--import', 'tsx', script],
        { env: { ...process.env, NODE_EXTRA_CA_CERTS: cert }, timeout: 15_000 },
        (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)),
      ),
    );
    t.log(out.trim());
    t.true(statusChecks > 0, 'the status check (fetch) reached the hub over TLS');
    t.is(out.trim(), 'uploaded', 'the PUT never left: the hub at that address answers, yet the upload "cannot reach" it');
    t.is(got, sealedSize(size, MIB));
  },
);
