// The node's side of the hub API. Reads need nothing; writes are signed with the node's current key.
import { signRequest } from '../protocol/hub-auth.js';
import type { Identity } from '../identity/store.js';
import { encodeKel } from '../identity/kel.js';
import type { MintAnswer, HoldAnswer, SettleAnswer, Account } from '../protocol/hub-api.js';
import { hubError } from '../protocol/hub-api.js';
import { deleteBlobs } from './blobs.js';

export { HubRefusedError, HubUnreachableError } from './errors.js';
import { HubRefusedError, HubUnreachableError } from './errors.js';

/** A connection reset or closed under a request (undici names the cause's code). */
function isReset(err: unknown): boolean {
  const code = ((err as Error)?.cause as { code?: string } | undefined)?.code;
  return code === 'ECONNRESET' || code === 'EPIPE' || code === 'UND_ERR_SOCKET';
}

export interface SearchResult {
  agents: { aid: string; name: string; card: string; kel: string; updatedAt: number }[];
  next: string | null;
}

export class HubClient {
  readonly base: string;
  constructor(
    base: string,
    private readonly identity?: Identity,
    private readonly now: () => number = Date.now,
  ) {
    this.base = base.replace(/\/+$/, '');
  }

  private async request(method: string, path: string, body?: unknown, signed = false): Promise<Response> {
    const raw = body instanceof Uint8Array;
    const bytes = body === undefined ? new Uint8Array() : raw ? Buffer.from(body) : Buffer.from(JSON.stringify(body));
    let res: Response;
    for (let attempt = 1; ; attempt++) {
      const headers: Record<string, string> = { 'content-type': raw ? 'application/cbor' : 'application/json' };
      if (signed) {
        if (!this.identity) throw new Error('a signed hub request needs the node identity');
        // Signed afresh for a second attempt: the first one's nonce may have reached the hub.
        Object.assign(headers, signRequest(this.identity.signer, this.identity.aid, method, path, bytes, this.now()));
      }
      try {
        res = await fetch(`${this.base}${path}`, { method, headers, ...(body === undefined ? {} : { body: bytes }) });
        break;
      } catch (err) {
        // A kept-alive connection the hub closed just as this request went out resets it. Every hub route
        // may be asked again (reads; writes by content; ledger ops by their own nonce; an invite makes
        // another token at worst): one more try on a new connection.
        if (attempt === 1 && isReset(err)) continue;
        throw new HubUnreachableError(this.base, err);
      }
    }
    if (!res.ok) {
      const { code, message } = hubError(res.status, await res.text());
      throw new HubRefusedError(res.status, code, message);
    }
    return res;
  }

  /** `invite`: a token from the hub's operator, for a hub that admits new AIDs by invitation (used by the first registration only). */
  async register(name: string, card: string | null, invite?: string): Promise<void> {
    const kel = Buffer.from(encodeKel(this.identity!.kel.events)).toString('base64');
    await this.request('POST', '/agents', { kel, name, card, ...(invite ? { invite } : {}) }, true);
  }

  /** A new single-use invite token; this client must hold the hub's own identity. */
  async invite(): Promise<string> {
    return ((await (await this.request('POST', '/invites', {}, true)).json()) as { token: string }).token;
  }

  async updateKel(): Promise<void> {
    const kel = Buffer.from(encodeKel(this.identity!.kel.events)).toString('base64');
    await this.request('PUT', `/agents/${this.identity!.aid}/kel`, { kel }, true);
  }

  async withdraw(): Promise<void> {
    await this.request('DELETE', `/agents/${this.identity!.aid}/card`, {}, true);
  }

  async search(params: { q?: string; skill?: string; tag?: string; cursor?: string; limit?: number }): Promise<SearchResult> {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') qs.set(k, String(v));
    return (await (await this.request('GET', `/agents?${qs}`)).json()) as SearchResult;
  }

  /** Publishes our signed encryption key set (WIRE §4). */
  async putKeys(keySet: Uint8Array): Promise<void> {
    await this.request('PUT', `/agents/${this.identity!.aid}/keys`, keySet, true);
  }

  async keys(aid: string): Promise<Uint8Array> {
    return new Uint8Array(await (await this.request('GET', `/agents/${aid}/keys`)).arrayBuffer());
  }

  /** The hub's AID (its ledger is `hub:<aid>` in prices) and its relay counters. */
  async health(): Promise<{ aid: string; relay: { delivered: number; queued: number; dropped: number; expired: number } }> {
    return (await (await this.request('GET', '/health')).json()) as never;
  }

  async card(aid: string): Promise<string> {
    return (await this.request('GET', `/agents/${aid}/card`)).text();
  }

  async kel(aid: string): Promise<Uint8Array> {
    return new Uint8Array(await (await this.request('GET', `/agents/${aid}/kel`)).arrayBuffer());
  }

  /** Credits a registered AID; this client must hold the hub's own identity. `nonce`: 16 random bytes, hex. */
  async mint(aid: string, amount: string, nonce: string): Promise<MintAnswer> {
    return (await (await this.request('POST', '/ledger/mint', { aid, amount, nonce }, true)).json()) as MintAnswer;
  }

  /** As the payee, holds the amount of a payer's signed authorization (signAuthorization's bytes). */
  async hold(authorization: Uint8Array): Promise<HoldAnswer> {
    const body = { authorization: Buffer.from(authorization).toString('base64') };
    return (await (await this.request('POST', '/ledger/hold', body, true)).json()) as HoldAnswer;
  }

  /** As the payee, captures a hold (pays us) or releases it (back to the payer); retried with the same nonce, it never pays twice. */
  async settle(hold: string, action: 'capture' | 'release', nonce: string): Promise<SettleAnswer> {
    return (await (await this.request('POST', '/ledger/settle', { hold, action, nonce }, true)).json()) as SettleAnswer;
  }

  /** Deletes file blobs (PROTOCOL §8.11): their files were read, or never will be. Unsigned (see deleteBlobs). */
  deleteBlobs(cids: string[]): Promise<void> {
    return deleteBlobs(this.base, cids);
  }

  /** An account: balance, open holds as payer, recent history. Shown to that AID and to the hub only. */
  async account(aid: string): Promise<Account> {
    return (await (await this.request('GET', `/ledger/accounts/${aid}`, undefined, true)).json()) as Account;
  }
}
