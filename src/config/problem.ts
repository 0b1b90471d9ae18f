// A finding about the configuration or its environment, addressed by its JSON path.
export interface Problem {
  severity: 'error' | 'warning';
  /** JSON path in config.json, e.g. `inbound.public_capabilities[1].per_caller_inflight`; '' for the file. */
  path: string;
  message: string;
  /** The data-dir file the problem is in, when it is not config.json (e.g. `keys/identity.cbor`). */
  file?: string;
}

export function formatPath(path: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out === '' ? String(part) : `.${String(part)}`;
  }
  return out;
}

export function formatProblem(p: Problem, file = 'config.json'): string {
  return `${p.severity}: ${p.file ?? file}${p.path ? ` ${p.path}` : ''}: ${p.message}`;
}

/** A problem in a data-dir file other than config.json. */
export const fileError = (file: string, message: string): Problem => ({ severity: 'error', path: '', message, file });

export const error = (path: string, message: string): Problem => ({ severity: 'error', path, message });
export const warning = (path: string, message: string): Problem => ({ severity: 'warning', path, message });

/** Document order by JSON path (numeric indexes compare as numbers), stable within one path. */
export function sortProblems(problems: Problem[]): Problem[] {
  return [...problems].sort((a, b) => a.path.localeCompare(b.path, 'en', { numeric: true }));
}
