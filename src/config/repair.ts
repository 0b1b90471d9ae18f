// When the schema refuses config.json, doctor still checks the rest of the file (SPEC §2: every problem in
// one run, like a compiler). The file is repaired: each value the schema refused is removed (so its default
// applies) or, when it is required, replaced by a stand-in. The paths repaired are remembered, so a rule
// that reads one is skipped: its value is not the operator's, and the schema's message already covers it.
import type { z } from 'zod';
import { configSchema, type Config } from './schema.js';
import { formatPath } from './problem.js';

/** True when the value at any of these paths (or at what holds it) is not the operator's but a repair. */
export type Faulty = (...paths: string[]) => boolean;

export const noFaults: Faulty = () => false;

/** What the checks after the schema run on: the config itself, or the file as repaired. */
export interface Checkable {
  config: Config;
  faulty: Faulty;
}

/** Stand-ins for the required values; never shown, since every rule that reads them is skipped. */
const STAND_INS: Record<string, unknown> = { id: 'stand-in', url: '', media_types: ['*/*'] };

// Each round repairs what the last one reported. A refused value takes at most three (a bad media type:
// emptied, then its list removed, then the list's stand-in); needing many more means it does not converge.
const MAX_ROUNDS = 8;

type Issue = z.core.$ZodIssue;
type Node = Record<PropertyKey, unknown>;

export function repairConfig(raw: unknown, issues: readonly Issue[]): Checkable | undefined {
  if (!isNode(raw)) return undefined;
  const copy = structuredClone(raw);
  const repaired = new Set<string>();
  let open = issues;
  for (let round = 0; round < MAX_ROUNDS; round++) {
    for (const issue of open) if (!mend(copy, issue, repaired)) return undefined;
    const parsed = configSchema.safeParse(copy);
    if (parsed.success) return { config: parsed.data, faulty: faultyIn(repaired) };
    open = parsed.error.issues;
  }
  return undefined;
}

function mend(root: Node, issue: Issue, repaired: Set<string>): boolean {
  if (issue.code !== 'unrecognized_keys') return replace(root, issue.path, repaired);
  // An unknown key holds nothing any rule reads: dropping it leaves every other value the operator's.
  const holder = valueAt(root, issue.path);
  if (isNode(holder)) for (const key of issue.keys) delete holder[key];
  return true;
}

function replace(root: Node, path: readonly PropertyKey[], repaired: Set<string>): boolean {
  if (path.length === 0) return false; // the file is not an object: there is nothing else to check
  const holder = valueAt(root, path.slice(0, -1));
  if (!isNode(holder)) return true; // inside a value this round already replaced
  const key = path[path.length - 1]!;
  const at = formatPath(path);
  const value = holder[key];
  if (value === undefined && typeof key === 'string' && Object.hasOwn(STAND_INS, key)) {
    holder[key] = structuredClone(STAND_INS[key]);
  } else if (value === undefined || repaired.has(at)) {
    // Removing or replacing it did not satisfy the schema: the value that holds it goes instead.
    return replace(root, path.slice(0, -1), repaired);
  } else if (typeof key === 'number') {
    holder[key] = {}; // an entry is emptied, not removed, so the entries after it keep their index
  } else {
    delete holder[key];
  }
  repaired.add(at);
  return true;
}

function faultyIn(repaired: ReadonlySet<string>): Faulty {
  const within = (path: string, outer: string) => path === outer || path.startsWith(`${outer}.`) || path.startsWith(`${outer}[`);
  return (...paths) => paths.some((path) => [...repaired].some((outer) => within(path, outer)));
}

function valueAt(root: Node, path: readonly PropertyKey[]): unknown {
  let node: unknown = root;
  for (const part of path) node = isNode(node) ? node[part] : undefined;
  return node;
}

function isNode(value: unknown): value is Node {
  return typeof value === 'object' && value !== null;
}
