// bench/calls' echo service, in its own process: src/service/sample.ts's echoHandler (the argument object
// back) on the Unix socket named by argv[2], the one service behind all three subjects (direct POST, the
// A2A SDK server, the provider daemon). Its own process so its CPU is counted apart from the caller's.
// Prints `ready` once it listens. Stops on SIGTERM.
import { echoHandler, startSampleService } from '../../src/service/sample.js';

const socketPath = process.argv[2];
if (!socketPath) throw new Error('usage: echo.js SOCKET');
const service = await startSampleService(socketPath, echoHandler);
process.once('SIGTERM', () => {
  service.server.closeAllConnections();
  void service.close().then(() => process.exit(0));
});
console.log('ready');
