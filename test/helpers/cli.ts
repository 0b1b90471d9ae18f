import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { main } from '../../src/cli/main.js';

export const BIN = fileURLToPath(new URL('../../dist/src/cli/bin.js', import.meta.url));

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the built `anet` binary as a separate process, as a user would. */
export function runBin(args: string[], env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env: { ...process.env, ...env } }, (err, stdout, stderr) => {
      const code = err ? (((err as NodeJS.ErrnoException & { code?: number }).code as unknown as number) ?? 1) : 0;
      resolve({ code: typeof code === 'number' ? code : 1, stdout, stderr });
    });
  });
}

/**
 * Runs the CLI in-process with captured output (faster; same code path as the binary). `onErr` sees each
 * stderr line as it is printed (a test can act on progress while the command still runs).
 */
export async function runCli(args: string[], onErr?: (line: string) => void): Promise<CliResult> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(args, {
    out: (l) => out.push(l),
    err: (l) => {
      err.push(l);
      onErr?.(l);
    },
  });
  return { code, stdout: out.join('\n'), stderr: err.join('\n') };
}
