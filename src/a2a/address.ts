// Where the local A2A endpoint listens (`local.a2a`, SPEC §12): a loopback address with a port, or a
// Unix socket. Anything else is refused at start: the endpoint acts as this node (it sends tasks and
// spends its credits), so it must never be reachable from another machine.
import { isLoopbackListen } from '../config/check.js';

export type Listen = { kind: 'tcp'; host: string; port: number } | { kind: 'unix'; path: string };

export class A2aAddressError extends Error {
  override name = 'A2aAddressError';
}

export function parseListen(text: string): Listen {
  if (!isLoopbackListen(text)) {
    throw new A2aAddressError(
      `local.a2a "${text}" is not a loopback address (127.0.0.1:PORT, [::1]:PORT, localhost:PORT) or unix:///path: the A2A endpoint is not started on it`,
    );
  }
  if (text.startsWith('unix://')) return { kind: 'unix', path: text.slice('unix://'.length) };
  const colon = text.lastIndexOf(':');
  const host = text.slice(0, colon);
  return { kind: 'tcp', host: host.startsWith('[') ? host.slice(1, -1) : host, port: Number(text.slice(colon + 1)) };
}

/**
 * The http origin clients use. For a Unix socket there is no TCP origin: clients connect through the
 * socket (e.g. undici's `socketPath`) and the URL only names the path, with `localhost` as host.
 */
export function originOf(listen: Listen, port: number): string {
  if (listen.kind === 'unix') return 'http://localhost';
  return `http://${listen.host.includes(':') ? `[${listen.host}]` : listen.host}:${port}`;
}
