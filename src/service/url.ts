// Service URLs (SPEC §2.2): `unix:///abs/socket[:/request/path]`, or http(s) only with allow_tcp.

export type ServiceUrl = { kind: 'unix'; socketPath: string; requestPath: string } | { kind: 'tcp'; url: URL };

export function parseServiceUrl(text: string): ServiceUrl | { error: string } {
  if (text.startsWith('unix://')) {
    const rest = text.slice('unix://'.length);
    if (!rest.startsWith('/')) return { error: 'a unix URL names an absolute socket path: unix:///abs/path.sock' };
    const split = rest.indexOf(':/');
    const socketPath = split < 0 ? rest : rest.slice(0, split);
    const requestPath = split < 0 ? '/' : rest.slice(split + 1);
    if (socketPath.length < 2 || socketPath.endsWith('/')) return { error: 'the unix URL names no socket file' };
    return { kind: 'unix', socketPath, requestPath };
  }
  if (/^https?:\/\//.test(text)) {
    try {
      return { kind: 'tcp', url: new URL(text) };
    } catch {
      return { error: 'not a valid http(s) URL' };
    }
  }
  return { error: 'use unix:///path/to/socket (or http(s):// with modules.service.allow_tcp)' };
}
