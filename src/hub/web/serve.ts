// The hub's web view (issue 22, item 4): `GET /` and `/web/…`, a small page that searches the directory
// through `GET /agents`, shows an agent's card and KEL, and verifies both in the browser. The hub only hands
// out files here: the page checks the KEL and the card's signature itself (PROTOCOL §2.4, §3.5, §3.7), so a
// reader trusts no server, this hub included.
//
// The page's crypto and CBOR are the packages the node itself verifies with (@noble/curves, @noble/hashes,
// cborg: plain ESM), served from node_modules as they are installed, so the browser runs the same strict
// Ed25519 checks (PROTOCOL §2.1) as src/identity/ed25519.ts in any browser, without a bundler.
import { readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { dirname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ServerResponse } from 'node:http';
import { HubError, send } from '../http.js';

/**
 * No inline script or style, nothing from another origin, and Trusted Types enforced, so that card text
 * (the agent writes it: attacker-controlled) can only ever become text nodes.
 */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'",
].join('; ');

const HEADERS = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

/** The page's own files, by URL. Anything else under /web/ that is not a library file is 404. */
const PAGE_FILES: Record<string, string> = {
  '/': 'index.html',
  '/web/style.css': 'style.css',
  '/web/app.js': 'app.js',
  '/web/dom.js': 'dom.js',
  '/web/render.js': 'render.js',
  '/web/verify.js': 'verify.js',
  '/web/kel.js': 'kel.js',
  '/web/json.js': 'json.js',
  '/web/codec.js': 'codec.js',
  '/web/codes.js': 'codes.js',
  '/web/defaults.js': 'defaults.js',
};

/** The packages the page imports, each by a file that resolves inside it. */
const LIBRARIES: Record<string, string> = {
  '@noble/curves': '@noble/curves/ed25519.js',
  '@noble/hashes': '@noble/hashes/sha2.js',
  cborg: 'cborg',
};

const LIB_PREFIX = '/web/lib/';

const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  css: 'text/css; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
};

/** True for the web view's paths: `/` and everything under `/web/`. */
export function isWebPath(pathname: string): boolean {
  return pathname === '/' || pathname.startsWith('/web/');
}

const cache = new Map<string, string>();

export async function serveWeb(res: ServerResponse, pathname: string): Promise<void> {
  let text = cache.get(pathname);
  if (text === undefined) {
    text = await load(pathname);
    cache.set(pathname, text);
  }
  const ext = pathname === '/' ? 'html' : pathname.slice(pathname.lastIndexOf('.') + 1);
  send(res, 200, text, TYPES[ext] ?? 'text/plain; charset=utf-8', HEADERS);
}

async function load(pathname: string): Promise<string> {
  const page = PAGE_FILES[pathname];
  if (page) return readFile(join(staticDir(), page), 'utf8');
  if (pathname.startsWith(LIB_PREFIX)) return rewriteImports(await readFile(libraryFile(pathname.slice(LIB_PREFIX.length)), 'utf8'));
  throw new HubError(404, 'NOT_FOUND', `no route GET ${pathname}`);
}

/**
 * The page's files are plain JavaScript, which tsc does not copy into dist/: they are read from the source
 * tree, beside this module when it runs from src/ (tsx), else from the package's src/ next to dist/.
 */
function staticDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const beside = join(here, 'static');
  return existsSync(beside) ? beside : join(here, '..', '..', '..', '..', 'src', 'hub', 'web', 'static');
}

/** `@noble/curves/abstract/edwards.js` → its file, only inside one of LIBRARIES and only a .js file. */
function libraryFile(rest: string): string {
  const name = Object.keys(LIBRARIES).find((n) => rest.startsWith(`${n}/`));
  if (!name || !rest.endsWith('.js') || rest.includes('..') || rest.includes('\\'))
    throw new HubError(404, 'NOT_FOUND', `no library file ${rest}`);
  const root = packageRoot(name);
  const file = resolve(root, rest.slice(name.length + 1));
  if (!file.startsWith(root + sep) || !existsSync(file)) throw new HubError(404, 'NOT_FOUND', `no library file ${rest}`);
  return file;
}

/** The installed package's directory (its entry file sits at its root for all three). */
function packageRoot(name: string): string {
  return dirname(fileURLToPath(import.meta.resolve(LIBRARIES[name]!)));
}

/**
 * A browser cannot resolve bare specifiers without an import map, and an import map is inline script,
 * which the policy forbids: the libraries' imports of each other are rewritten to these URLs instead.
 */
export function rewriteImports(source: string): string {
  return source.replace(/((?:from|import)\s*)(['"])(@noble\/(?:curves|hashes)\/[^'"]+|cborg)\2/g, (_all, lead, quote, spec) => {
    const path = spec === 'cborg' ? 'cborg/cborg.js' : spec;
    return `${lead}${quote}${LIB_PREFIX}${path}${quote}`;
  });
}
