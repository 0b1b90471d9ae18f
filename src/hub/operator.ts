// The operator's requests to its own running hub (`anet-hub mint`, `anet-hub invite` while the hub holds
// the store): signed by the hub's identity, as a node signs its writes. The node's hub client
// (src/hub-client/) is node code the hub does not load, so the hub has this one POST of its own; its two
// errors read as the node client's do (HubUnreachableError, HubRefusedError).
import { signRequest } from '../protocol/hub-auth.js';
import type { Identity } from '../identity/store.js';
import { hubError } from '../protocol/hub-api.js';
import { oneLine } from '../util/text.js';

/** A request the running hub could not take: the one line to print. */
export class OperatorRequestError extends Error {
  override name = 'OperatorRequestError';
}

function unreachable(hub: string, cause: unknown): OperatorRequestError {
  const why = (cause as Error)?.cause ? ((cause as Error).cause as Error).message : (cause as Error).message;
  return new OperatorRequestError(`cannot reach the hub at ${hub} (${why}); is it running? (\`anet hub start\`)`);
}

/** POSTs `body` as JSON to `path` of the hub at `url`, signed by `identity`; the JSON answer. */
export async function operatorPost<T>(url: string, identity: Identity, path: string, body: unknown): Promise<T> {
  const base = url.replace(/\/+$/, '');
  const bytes = Buffer.from(JSON.stringify(body));
  const headers = { 'content-type': 'application/json', ...signRequest(identity.signer, identity.aid, 'POST', path, bytes, Date.now()) };
  let res: Response;
  try {
    res = await fetch(`${base}${path}`, { method: 'POST', headers, body: bytes });
  } catch (err) {
    throw unreachable(base, err);
  }
  if (!res.ok) {
    const { code, message } = hubError(res.status, await res.text());
    throw new OperatorRequestError(`the hub refused: ${oneLine(code, 64)}: ${oneLine(message, 300)}`);
  }
  return (await res.json()) as T;
}
