// Exit codes of SPEC §12: 0 success, 1 refused or failed, 2 usage. Errors are one clear line.
import { jsonReplacer } from '../util/json.js';

export class CliError extends Error {
  override name = 'CliError';
  constructor(
    message: string,
    readonly exitCode: 1 | 2 = 1,
  ) {
    super(message);
  }
}

export const usageError = (message: string) => new CliError(`${message} (see \`anet help\`)`, 2);

export interface Io {
  out(line: string): void;
  err(line: string): void;
}

export const processIo: Io = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
};

/** JSON for data output (src/util/json.ts): bigints as decimal strings, bytes as hex. */
export { jsonReplacer };

export function printJson(io: Io, value: unknown): void {
  io.out(JSON.stringify(value, jsonReplacer, 2));
}

export { untilSignal } from '../util/signal.js';
