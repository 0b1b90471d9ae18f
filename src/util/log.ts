// Structured logs (issue 22) for the node's daemon and the hub, through pino: one JSON line per event
// (`{"level":"info","time":"…","name":"anet daemon","msg":"…"}`) when the lines go to a file or a
// journal, a short readable line (`anet daemon: …`, `anet daemon: warning: …`) on a terminal. The code
// logs through a plain `Log` function handed down (`log(line)` is info; a second argument gives another
// level), so no module below the surfaces knows of pino. What to keep out of a line (payloads, tokens,
// keys; on the hub, peers' AIDs above debug) is the caller's part; the hub also masks AIDs (redactAids).
import { pino, type Logger } from 'pino';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/** How the code logs: `log(line)` at info, `log(line, 'warn')` at another level. */
export type Log = (line: string, level?: LogLevel) => void;

export const LOG_LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error'];

export const isLogLevel = (s: string): s is LogLevel => (LOG_LEVELS as readonly string[]).includes(s);

/** The level asked for (`--log-level`, else ANET_LOG_LEVEL, else info); a string naming the fix when it is none. */
export function logLevel(flag: string | undefined, env: string | undefined = process.env.ANET_LOG_LEVEL): LogLevel | string {
  const asked = flag ?? env ?? 'info';
  if (isLogLevel(asked)) return asked;
  return `${flag !== undefined ? '--log-level' : 'ANET_LOG_LEVEL'} takes one of ${LOG_LEVELS.join(', ')}, not "${asked}"`;
}

export interface LoggerOptions {
  /** Who logs: `anet daemon`, `anet hub`; the readable line starts with it. */
  name: string;
  level: LogLevel;
  /** Where each line goes (without its newline): stderr by the CLI's Io. */
  write: (line: string) => void;
  /** A terminal reads it: readable lines instead of JSON. */
  readable: boolean;
}

/** A pino logger writing one line per event to `write`, as JSON or readable. */
export function createLogger(opts: LoggerOptions): Logger {
  const readable = (json: string) => {
    const e = JSON.parse(json) as { level: LogLevel; msg: string };
    const tag = e.level === 'info' ? '' : `${e.level === 'warn' ? 'warning' : e.level}: `;
    opts.write(`${opts.name}: ${tag}${e.msg}`);
  };
  return pino(
    {
      level: opts.level,
      // No pid or hostname on every line (the journal has them); who logs, by name.
      base: { name: opts.name },
      timestamp: pino.stdTimeFunctions.isoTime,
      // The level as its name: a reader of the JSON need not know pino's numbers.
      formatters: { level: (label) => ({ level: label }) },
    },
    { write: (json: string) => (opts.readable ? readable(json) : opts.write(json.trimEnd())) },
  );
}

/** The `Log` function the code is handed, over a pino logger. */
export function logTo(logger: Logger): Log {
  return (line, level = 'info') => logger[level](line);
}

const AID = /bafyrei[a-z2-7]{20,}/g;

/** A line with every AID in it masked: what the hub logs above debug (who talked to whom stays unknown). */
export function redactAids(line: string): string {
  return line.replace(AID, 'bafyrei…');
}
