// `anet doctor` (SPEC §2): the config file, the live environment it names, the identity (its file and
// mode) and the encryption key file — without starting the node.
import { readConfig } from '../config/load.js';
import { a2aTokenPath, checkEnvironment, readTokenFile } from '../config/environment.js';
import { existsSync } from 'node:fs';
import { fileError, sortProblems, type Problem } from '../config/problem.js';
import { hasIdentity, loadIdentity, identityModeProblem } from '../identity/store.js';
import { checkKeyFile } from '../relay/keyset.js';

export interface DoctorReport {
  problems: Problem[];
  errors: number;
  warnings: number;
  configFromFile: boolean;
  aid?: string;
}

/**
 * Every stage runs, whatever the ones before found: a schema error does not hide a socket problem of the
 * same file, so the operator fixes everything after one run.
 */
export async function runDoctor(dataDir: string): Promise<DoctorReport> {
  const result = await readConfig(dataDir);
  const checkable = result.checkable;
  const environment = checkable ? await checkEnvironment(checkable.config, checkable.faulty) : [];
  const problems = sortProblems([...result.problems, ...environment]);
  problems.push(...(await checkA2aToken(dataDir)));
  let aid: string | undefined;
  if (await hasIdentity(dataDir)) {
    try {
      aid = (await loadIdentity(dataDir)).aid;
    } catch (err) {
      problems.push(fileError('keys/identity.cbor', (err as Error).message));
    }
    const loose = await identityModeProblem(dataDir);
    if (loose) problems.push(fileError('keys/identity.cbor', loose));
  }
  // A damaged encryption key file leaves the node deaf: the daemon refuses to start with it.
  const keys = await checkKeyFile(dataDir);
  if (keys) problems.push(fileError('keys/enc.cbor', keys));
  return {
    problems,
    errors: problems.filter((p) => p.severity === 'error').length,
    warnings: problems.filter((p) => p.severity === 'warning').length,
    configFromFile: result.fromFile,
    ...(aid ? { aid } : {}),
  };
}

/**
 * The local A2A endpoint's token (SPEC §12), when the daemon made one: a file others can read, or one
 * that is not the daemon's, keeps the endpoint from starting. None yet is fine: the first start makes it.
 */
async function checkA2aToken(dataDir: string): Promise<Problem[]> {
  const path = a2aTokenPath(dataDir);
  if (!existsSync(path)) return [];
  const read = await readTokenFile(path);
  if (!('error' in read)) return [];
  return [
    fileError(
      'a2a.token',
      `${read.error}; the local A2A endpoint will not start until it is fixed (or deleted: the next start makes a new one)`,
    ),
  ];
}
