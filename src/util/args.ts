// The command lines of `anet` and `anet-hub`, read alike.
import { parseArgs, type ParseArgsConfig } from 'node:util';

/**
 * `argv` by `options`, positionals allowed and unknown options refused; what parseArgs refuses becomes
 * `usage(the first line of its message)` (exit 2 in both programs).
 */
export function parseCommandLine<O extends NonNullable<ParseArgsConfig['options']>>(
  argv: string[],
  options: O,
  usage: (message: string) => Error,
) {
  try {
    return parseArgs({ args: argv, options, allowPositionals: true as const, strict: true as const });
  } catch (err) {
    throw usage((err as Error).message.split('\n')[0]!);
  }
}
