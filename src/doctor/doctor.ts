// `anet doctor` (SPEC §2): the config file, the live environment it names, and the identity — without
// starting the node.
import { readConfig } from '../config/load.js';
import { checkEnvironment } from '../config/environment.js';
import { error, sortProblems, type Problem } from '../config/problem.js';
import { hasIdentity, loadIdentity } from '../identity/store.js';

export interface DoctorReport {
  problems: Problem[];
  errors: number;
  warnings: number;
  configFromFile: boolean;
  aid?: string;
}

export async function runDoctor(dataDir: string): Promise<DoctorReport> {
  const result = await readConfig(dataDir);
  let problems = [...result.problems];
  if (result.config) problems = sortProblems([...problems, ...(await checkEnvironment(result.config))]);
  let aid: string | undefined;
  if (await hasIdentity(dataDir)) {
    try {
      aid = (await loadIdentity(dataDir)).aid;
    } catch (err) {
      problems.push(error('', `identity: ${(err as Error).message}`));
    }
  }
  return {
    problems,
    errors: problems.filter((p) => p.severity === 'error').length,
    warnings: problems.filter((p) => p.severity === 'warning').length,
    configFromFile: result.fromFile,
    ...(aid ? { aid } : {}),
  };
}
