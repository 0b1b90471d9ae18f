// Strict JSON and JCS (PROTOCOL §1.2, §3.5). JSON.parse keeps the last of a repeated member silently; a
// card must be refused for one (MALFORMED_JSON), since two parsers could then read two different cards.

const WHITESPACE = /[ \t\n\r]*/y;
// biome-ignore lint/suspicious/noControlCharactersInRegex: JSON refuses raw control characters in a string.
const STRING = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const LITERAL = /true|false|null/y;

/** Deeper than this the parse stops; the caller tells a deep card (CARD_TOO_LARGE) from bad JSON. */
export const MAX_PARSE_DEPTH = 512;

export class JsonError extends Error {}
export class TooDeep extends Error {}

/** JSON text to a value, refusing repeated members and anything JSON.parse would refuse. */
export function parseStrict(text) {
  const state = { text, at: 0 };
  const value = parseValue(state, 0);
  skip(state);
  if (state.at !== text.length) throw new JsonError(`unexpected text at ${state.at}`);
  return value;
}

function skip(state) {
  WHITESPACE.lastIndex = state.at;
  WHITESPACE.exec(state.text);
  state.at = WHITESPACE.lastIndex;
}

function token(state, pattern) {
  pattern.lastIndex = state.at;
  const m = pattern.exec(state.text);
  if (!m) return null;
  state.at = pattern.lastIndex;
  return m[0];
}

function parseValue(state, depth) {
  skip(state);
  const c = state.text[state.at];
  if (c === '{' || c === '[') {
    if (depth >= MAX_PARSE_DEPTH) throw new TooDeep('nested too deep');
    return c === '{' ? parseObject(state, depth + 1) : parseArray(state, depth + 1);
  }
  const text = token(state, STRING) ?? token(state, NUMBER) ?? token(state, LITERAL);
  if (text === null) throw new JsonError(`unexpected text at ${state.at}`);
  return JSON.parse(text);
}

function expect(state, char) {
  skip(state);
  if (state.text[state.at] !== char) throw new JsonError(`expected ${char} at ${state.at}`);
  state.at++;
}

function parseObject(state, depth) {
  state.at++;
  const out = {};
  const seen = new Set();
  skip(state);
  if (state.text[state.at] === '}') return close(state, out);
  for (;;) {
    skip(state);
    const key = token(state, STRING);
    if (key === null) throw new JsonError(`expected a member name at ${state.at}`);
    const name = JSON.parse(key);
    if (seen.has(name)) throw new JsonError(`member ${key} repeated`);
    seen.add(name);
    expect(state, ':');
    Object.defineProperty(out, name, { value: parseValue(state, depth), enumerable: true, writable: true, configurable: true });
    skip(state);
    if (state.text[state.at] === '}') return close(state, out);
    expect(state, ',');
  }
}

/** Steps past a closing bracket and gives the finished container. */
function close(state, value) {
  state.at++;
  return value;
}

function parseArray(state, depth) {
  state.at++;
  const out = [];
  skip(state);
  if (state.text[state.at] === ']') return close(state, out);
  for (;;) {
    out.push(parseValue(state, depth));
    skip(state);
    if (state.text[state.at] === ']') return close(state, out);
    expect(state, ',');
  }
}

/** RFC 8785: members sorted by UTF-16 code units, numbers and strings as ECMAScript writes them. */
export function canonicalize(value) {
  if (value === null || typeof value !== 'object') {
    if (typeof value === 'number' && !Number.isFinite(value)) throw new JsonError('not a finite number');
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map(canonicalize).join(',')}]`;
  const keys = Object.keys(value).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalize(value[k])}`).join(',')}}`;
}

/** How deeply arrays and objects nest, counted level by level (no recursion on a hostile card). */
export function depthOf(value, limit) {
  let level = [value];
  let depth = 0;
  while (depth <= limit) {
    const containers = level.filter((v) => v !== null && typeof v === 'object');
    if (containers.length === 0) return depth;
    depth++;
    level = containers.flatMap((v) => (Array.isArray(v) ? v : Object.values(v)));
  }
  return depth;
}
