import { runDoctor } from '../doctor/doctor.js';
import { formatProblem } from '../config/problem.js';
import { CliError, printJson, type Io } from './output.js';

export async function cmdDoctor(io: Io, dataDir: string, json: boolean): Promise<void> {
  const report = await runDoctor(dataDir);
  if (json) printJson(io, report);
  else {
    if (!report.configFromFile) io.out(`note: no config.json in ${dataDir}; the embedded defaults apply (run \`anet init\`)`);
    for (const p of report.problems) io.out(formatProblem(p));
    io.out(report.problems.length === 0 ? 'ok: no problems found' : `${report.errors} error(s), ${report.warnings} warning(s)`);
  }
  if (report.errors > 0) throw new CliError('', 1);
}
