// Reading config.json (SPEC §2): comments allowed, duplicate keys refused, integers kept exact (bigint
// beyond 2^53, so prices up to 2^63−1 survive), then the schema, then the cross-field checks. A schema
// error does not stop the cross-field checks: they run on the rest of the file (repair.ts).
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse as parseLossless, isInteger, isSafeNumber } from 'lossless-json';
import stripJsonComments from 'strip-json-comments';
import { closest } from 'fastest-levenshtein';
import type { z } from 'zod';
import { configSchema, type Config } from './schema.js';
import { checkConfig } from './check.js';
import { noFaults, repairConfig, type Checkable } from './repair.js';
import { error, formatPath, sortProblems, type Problem } from './problem.js';
import { isNotFound } from '../util/fsutil.js';

export interface ConfigResult {
  /** Present when the file parsed and matched the schema (it may still have cross-field errors). */
  config?: Config;
  /** Present when the file parsed: what doctor's environment checks run on, even after a schema error. */
  checkable?: Checkable;
  problems: Problem[];
  /** False when there was no config.json and the embedded defaults apply. */
  fromFile: boolean;
}

export const configPath = (dataDir: string) => join(dataDir, 'config.json');

export async function readConfig(dataDir: string): Promise<ConfigResult> {
  let text: string;
  try {
    text = await readFile(configPath(dataDir), 'utf8');
  } catch (err) {
    if (isNotFound(err)) return { ...validateConfig({}), fromFile: false };
    return { problems: [error('', `cannot read: ${(err as Error).message}`)], fromFile: true };
  }
  return parseConfig(text);
}

export function parseConfig(text: string): ConfigResult {
  let raw: unknown;
  try {
    raw = parseLossless(stripJsonComments(text), undefined, parseNumber);
  } catch (err) {
    return { problems: [error('', `not valid JSON: ${(err as Error).message} (line ${lineOf(text, err)})`)], fromFile: true };
  }
  return { ...validateConfig(raw), fromFile: true };
}

/** Integers beyond 2^53 become bigint so they stay exact; everything else is a plain number. */
function parseNumber(text: string): number | bigint {
  return isInteger(text) && !isSafeNumber(text) ? BigInt(text) : Number(text);
}

function lineOf(text: string, err: unknown): number {
  const at = /position (\d+)/.exec((err as Error).message);
  return at ? text.slice(0, Number(at[1])).split('\n').length : 1;
}

export function validateConfig(raw: unknown): Omit<ConfigResult, 'fromFile'> {
  const parsed = configSchema.safeParse(raw);
  if (parsed.success) {
    const config = parsed.data;
    return { config, checkable: { config, faulty: noFaults }, problems: sortProblems(checkConfig(config)) };
  }
  const schemaProblems = parsed.error.issues.flatMap(issueToProblems);
  const checkable = repairConfig(raw, parsed.error.issues);
  if (!checkable) return { problems: sortProblems(schemaProblems) };
  const crossField = checkConfig(checkable.config, checkable.faulty);
  return { checkable, problems: sortProblems([...schemaProblems, ...crossField]) };
}

function issueToProblems(issue: z.core.$ZodIssue): Problem[] {
  if (issue.code !== 'unrecognized_keys') return [error(formatPath(issue.path), issue.message)];
  const known = knownKeysAt(issue.path);
  return issue.keys.map((key) => {
    const guess = known.length > 0 ? closest(key, known) : undefined;
    const hint = guess ? ` (did you mean "${guess}"?)` : '';
    return error(formatPath([...issue.path, key]), `unknown key${hint}`);
  });
}

type AnySchema = { _zod: { def: Record<string, unknown> } };

/** The keys the schema accepts at a path, found by walking the zod definition. */
function knownKeysAt(path: ReadonlyArray<PropertyKey>): string[] {
  let node = unwrap(configSchema as unknown as AnySchema);
  for (const part of path) {
    const def = node._zod.def;
    const child = typeof part === 'number' ? def.element : (def.shape as Record<string, AnySchema> | undefined)?.[String(part)];
    if (!child) return [];
    node = unwrap(child as AnySchema);
  }
  const shape = node._zod.def.shape as Record<string, unknown> | undefined;
  return shape ? Object.keys(shape) : [];
}

function unwrap(node: AnySchema): AnySchema {
  let n = node;
  for (;;) {
    const def = n._zod.def;
    const inner = (def.innerType ?? def.in) as AnySchema | undefined;
    if (!inner || def.type === 'object' || def.type === 'array') return n;
    n = inner;
  }
}
