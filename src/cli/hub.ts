import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { startHub } from '../hub/server.js';
import { ensureDir } from '../fsutil.js';
import { usageError, untilSignal, type Io } from './output.js';

export async function cmdHubStart(io: Io, dataFlag: string | undefined, portFlag: string | undefined): Promise<void> {
  const port = portFlag === undefined ? 8710 : Number(portFlag);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw usageError('--port takes a port number (0 picks a free one)');
  const dataDir = dataFlag ? resolve(dataFlag) : join(homedir(), '.anet-hub');
  await ensureDir(dataDir, 0o700);
  const hub = await startHub({ dataDir, port });
  io.out(`anet hub: ready on ${hub.url}; hub AID ${hub.aid}; data ${dataDir}`);
  await untilSignal();
  await hub.close();
  io.out('anet hub: stopped');
}
