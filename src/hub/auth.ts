// Signed requests to the hub (SPEC §11, PROTOCOL §8.1): the signature over method, path, time, nonce and
// body digest, checked against the signer's current key; the clock window; and each nonce once, on any
// replica: the claim is the storage's (src/hub/storage/types.ts NonceStore), atomic across replicas. Seen
// nonces are kept until they are twice the window old; the pruning's clock is this hub's, so two hubs in
// one process (the tests, the demo) prune each their own store.
import type { IncomingMessage } from 'node:http';
import { authMessage, AUTH_WINDOW_MS } from '../protocol/hub-auth.js';
import { verify as verifyEd25519 } from '../identity/ed25519.js';
import type { KelState } from '../identity/kel.js';
import type { NonceStore, RequestNonce } from './storage/types.js';
import { HubError } from './http.js';

export function header(req: IncomingMessage, name: string): string {
  const v = req.headers[name];
  if (typeof v !== 'string' || v.length === 0) throw new HubError(401, 'UNAUTHENTICATED', `missing ${name}`);
  return v;
}

/** The signed-request check of one hub: the nonces it holds in memory and when it last pruned the stored ones. */
export class RequestAuth {
  private lastPrune = 0;

  constructor(
    private readonly nonces: NonceStore,
    private readonly now: () => number,
  ) {}

  /** Checks the request signature against `kel`'s current key, the clock window, and nonce reuse. */
  async check(req: IncomingMessage, path: string, body: Buffer, kel: KelState): Promise<void> {
    await this.claim(this.verify(req, path, body, kel));
  }

  /**
   * The signature and clock checks of `check`, without the claim: its nonce, for a ledger op to claim in
   * its own transaction (one round trip less). `taken` after the op, or `claim` it here.
   */
  verify(req: IncomingMessage, path: string, body: Buffer, kel: KelState): RequestNonce {
    const aid = header(req, 'x-anet-aid');
    const time = header(req, 'x-anet-time');
    const nonce = header(req, 'x-anet-nonce');
    const sig = Buffer.from(header(req, 'x-anet-signature'), 'base64url');
    if (aid !== kel.aid) throw new HubError(401, 'UNAUTHENTICATED', 'x-anet-aid is not this agent');
    const t = Number(time);
    if (!/^[0-9]{1,16}$/.test(time) || Math.abs(this.now() - t) > AUTH_WINDOW_MS) {
      throw new HubError(401, 'CLOCK_SKEW', `request time is more than ${AUTH_WINDOW_MS / 1000} s from the hub's clock`);
    }
    if (!/^[0-9a-f]{32}$/.test(nonce)) throw new HubError(401, 'UNAUTHENTICATED', 'x-anet-nonce must be 16 random bytes in hex');
    if (!verifyEd25519(kel.currentKey, authMessage(req.method ?? '', path, time, nonce, body), sig)) {
      throw new HubError(401, 'UNAUTHENTICATED', "the request is not signed by the agent's current key");
    }
    return { aid, nonce, time: t };
  }

  /** Claims a verified request's nonce, unless a ledger transaction has (REPLAYED when it was seen before). */
  async claim(n: RequestNonce): Promise<void> {
    // Of copies of one request arriving together, on one replica or several, one claim succeeds.
    if (!n.taken && !(await this.nonces.claim(n.aid, n.nonce, n.time)))
      throw new HubError(401, 'REPLAYED', 'this request was already received');
    await this.prune(this.now());
  }

  /** Drops stored nonces older than twice the window (at most once a window): their requests would fail CLOCK_SKEW anyway. */
  private async prune(at: number): Promise<void> {
    if (at - this.lastPrune < AUTH_WINDOW_MS) return;
    this.lastPrune = at;
    await this.nonces.prune(at - 2 * AUTH_WINDOW_MS);
  }
}
