// bench/hub's baseline: a plain node:http server on loopback answering every request with 202 once its
// body is in, in its own process, driven over IPC like ./child.ts (`cpu`, `mem`, `stop`).
import { createServer } from 'node:http';
import { answerBench } from './ipc.js';

const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => res.writeHead(202, { 'content-length': '0' }).end());
});
server.keepAliveTimeout = 600_000;
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
const port = (server.address() as { port: number }).port;

answerBench(
  () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
);
process.send!({ url: `http://127.0.0.1:${port}` });
