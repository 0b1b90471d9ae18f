// bench/files' baseline server, in its own process: a plain node:http server on loopback that reads every
// request's body, discards it and answers 200 with the byte count. Prints `ready <port>`; stops on SIGTERM.
import { createServer } from 'node:http';

const server = createServer((req, res) => {
  let bytes = 0;
  req.on('data', (c: Buffer) => {
    bytes += c.length;
  });
  req.on('end', () => res.writeHead(200, { 'content-type': 'text/plain' }).end(String(bytes)));
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
process.once('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
console.log(`ready ${(server.address() as { port: number }).port}`);
