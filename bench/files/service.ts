// bench/files' service, in its own process: the streaming digest service (src/service/digest.ts) on the
// Unix socket named by argv[2]. Prints `ready` once it listens, and `call <json>` with each call's answer
// (each file's name, type, size and sha-256) once it is sent, so the bench checks what the service itself
// computed. Stops on SIGTERM.
import { startDigestService } from '../../src/service/digest.js';

const socketPath = process.argv[2];
if (!socketPath) throw new Error('usage: service.js SOCKET');
const service = await startDigestService(socketPath);
service.server.on('request', (_req, res) => {
  // The service's own handler (added first) has pushed the call's digests by the time the answer is sent.
  res.once('finish', () => console.log(`call ${JSON.stringify(service.calls.at(-1) ?? null)}`));
});
process.once('SIGTERM', () => {
  service.server.closeAllConnections();
  void service.close().then(() => process.exit(0));
});
console.log('ready');
