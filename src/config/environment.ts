// Checks of the live environment behind a config (SPEC §2.2, §3.2): sockets and token files.
import { lstat, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Config } from './schema.js';
import { error, warning, type Problem } from './problem.js';
import { parseServiceUrl } from '../service/url.js';
import { checkSocket } from '../service/socket.js';
import { noFaults, type Faulty } from './repair.js';

export const MIN_TOKEN_BYTES = 16;

/** The local A2A endpoint's bearer token file (SPEC §12): the daemon makes it, `anet doctor` checks it. */
export const a2aTokenPath = (dataDir: string) => join(dataDir, 'a2a.token');

/** Reads a bearer token, refusing files other users can read or write and tokens shorter than 16 bytes. */
export async function readTokenFile(path: string, uid = process.getuid?.() ?? 0): Promise<{ token: string } | { error: string }> {
  let st: Awaited<ReturnType<typeof lstat>>;
  try {
    st = await lstat(path);
  } catch (err) {
    return { error: `cannot read token file ${path}: ${(err as NodeJS.ErrnoException).code}` };
  }
  if (!st.isFile()) return { error: `token file ${path} is not a regular file` };
  if (st.uid !== uid) return { error: `token file ${path} is owned by uid ${st.uid}, not the daemon's uid ${uid}` };
  if ((st.mode & 0o077) !== 0) {
    return { error: `token file ${path} is accessible to other users (mode ${(st.mode & 0o777).toString(8)}); run chmod 600 ${path}` };
  }
  const token = (await readFile(path, 'utf8')).replace(/\r?\n$/, '');
  if (Buffer.byteLength(token) < MIN_TOKEN_BYTES) return { error: `token in ${path} is shorter than ${MIN_TOKEN_BYTES} bytes` };
  return { token };
}

/**
 * `faulty` names the values the schema refused (see repair.ts): their sockets are not looked at, the other
 * entries' are, so one bad entry does not hide a socket problem of another.
 */
export async function checkEnvironment(config: Config, faulty: Faulty = noFaults): Promise<Problem[]> {
  const service = config.modules.service;
  const problems: Problem[] = [];
  if (service.token_file?.startsWith('/')) {
    const t = await readTokenFile(service.token_file);
    if ('error' in t) problems.push(error('modules.service.token_file', t.error));
  }
  for (const [i, cap] of service.capabilities.entries()) {
    const at = `modules.service.capabilities[${i}]`;
    const url = faulty(`${at}.url`) ? null : parseServiceUrl(cap.url);
    if (url && !('error' in url) && url.kind === 'unix') {
      const fault = await checkSocket(url.socketPath);
      if (fault) problems.push((fault.missing ? warning : error)(`${at}.url`, fault.reason));
    }
    if (cap.token_file?.startsWith('/')) {
      const t = await readTokenFile(cap.token_file);
      if ('error' in t) problems.push(error(`${at}.token_file`, t.error));
    }
  }
  const agent = config.modules.agent && !faulty('modules.agent.url') && parseServiceUrl(config.modules.agent.url);
  if (agent && !('error' in agent) && agent.kind === 'unix') {
    const fault = await checkSocket(agent.socketPath);
    if (fault) problems.push((fault.missing ? warning : error)('modules.agent.url', fault.reason));
  }
  return problems;
}
