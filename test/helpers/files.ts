import type { ExecutionContext } from 'ava';
import { mkdir, readdir, readFile } from 'node:fs/promises';
import { createConnection, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { startNet, type Net } from './net.js';
import { startDigestService } from '../../src/service/digest.js';

/** Every file under `dir` whose raw bytes contain `marker` (to prove what a data dir does not hold). */
export async function filesContaining(dir: string, marker: string): Promise<string[]> {
  const hits: string[] = [];
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    if ((await readFile(path)).includes(marker)) hits.push(path);
  }
  return hits;
}

const MIB = 1024 * 1024;

/**
 * A Unix socket at `path` that passes connections on to `target`, what comes in at most `bytesPerSecond`
 * (answers at once): a service that reads slowly, so the provider's reading of a file lasts.
 */
async function slowSocket(t: ExecutionContext, path: string, target: string, bytesPerSecond: number): Promise<string> {
  const open = new Set<Socket>();
  const server = createServer((inbound) => {
    const outbound = createConnection(target);
    for (const s of [inbound, outbound]) {
      open.add(s);
      s.on('close', () => open.delete(s));
      s.on('error', () => {});
    }
    outbound.pipe(inbound);
    inbound.on('end', () => outbound.end());
    inbound.on('data', (chunk: Buffer) => {
      inbound.pause();
      outbound.write(chunk);
      setTimeout(() => inbound.resume(), (chunk.length / bytesPerSecond) * 1000);
    });
  });
  await new Promise<void>((resolve) => server.listen(path, resolve));
  t.teardown(() => {
    for (const s of open) s.destroy();
    server.close();
  });
  return path;
}

/**
 * A provider whose `file.sum` capability takes up to 8 PNGs of up to 64 MiB (issue 20), served by the
 * streaming digest service; `extra` adds to the capability, `files` to its files rule. `readRate`: the
 * service reads its requests at most this many bytes a second (and the provider reads the files as fast).
 */
export async function fileProvider(
  t: ExecutionContext,
  net: Net,
  extra: Record<string, unknown> = {},
  files: Record<string, unknown> = {},
  readRate?: number,
) {
  const run = join(net.root, 'run');
  await mkdir(run, { recursive: true, mode: 0o700 });
  const service = await startDigestService(join(run, 'sum.sock'));
  t.teardown(() => service.close());
  const socket = readRate ? await slowSocket(t, join(run, 'slow.sock'), service.socketPath, readRate) : service.socketPath;
  const caps = [{ id: 'file.sum', files: { media_types: ['image/png'], max_count: 8, max_bytes: 64 * MIB, ...files }, ...extra }];
  const config = {
    inbound: { policy: 'open', public_capabilities: caps },
    modules: { service: { capabilities: [{ id: 'file.sum', url: `unix://${socket}` }] } },
  };
  return { ...(await net.node('p', config)), service };
}

/** A net with that provider `p` and a caller `c`, both daemons running. */
export async function filePair(
  t: ExecutionContext,
  extra: Record<string, unknown> = {},
  files: Record<string, unknown> = {},
  readRate?: number,
) {
  const net = await startNet(t);
  const p = await fileProvider(t, net, extra, files, readRate);
  const c = await net.node('c');
  await net.start(p.dir);
  await net.start(c.dir);
  return { net, p, c };
}
