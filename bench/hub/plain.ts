// bench/hub's baseline: a plain node:http server on loopback answering every request with 202 once its
// body is in, in its own process, driven over IPC like ./child.ts (`cpu`, `mem`, `stop`).
import { createServer } from 'node:http';

const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => res.writeHead(202, { 'content-length': '0' }).end());
});
server.keepAliveTimeout = 600_000;
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
const port = (server.address() as { port: number }).port;

const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});

// The bench gone (killed, or crashed): no hub outlives it.
process.once('disconnect', () => process.exit(0));

process.on('message', (m: { cmd: string }) => {
  if (m.cmd === 'cpu') {
    const c = process.cpuUsage();
    process.send!({ cmd: 'cpu', value: c.user + c.system });
  } else if (m.cmd === 'mem') {
    gc();
    gc();
    const { rss, heapUsed, external, arrayBuffers } = process.memoryUsage();
    process.send!({ cmd: 'mem', value: { rss, heapUsed, external, arrayBuffers } });
  } else if (m.cmd === 'stop') {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  }
});
process.send!({ url: `http://127.0.0.1:${port}` });
