// A node's connection to its hub relay: one signed push stream for incoming envelopes, and anonymous
// sends over a keep-alive connection.
import { request, Agent, type ClientRequest } from 'node:http';
import { signRequest } from '../hub/auth.js';
import type { Identity } from '../identity/store.js';
import { HubRefusedError, HubUnreachableError } from '../hub/client.js';

export class RelayClient {
  private readonly base: URL;
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 16 });
  private stream: ClientRequest | null = null;
  /** Called once when an open push stream ends (hub restart, network loss): the owner reconnects. */
  onClose: () => void = () => {};

  constructor(hub: string, private readonly identity: Identity, private readonly onEnvelope: (bytes: Uint8Array) => void, private readonly now: () => number = Date.now) {
    this.base = new URL(hub);
  }

  /** Opens the push stream; resolves once the hub has accepted it. */
  connect(): Promise<void> {
    const path = '/relay/v2/stream';
    const headers = signRequest(this.identity.signer, this.identity.aid, 'GET', path, new Uint8Array(), this.now());
    this.stream?.destroy();
    this.stream = null;
    return new Promise((resolve, reject) => {
      let ended = false;
      let opened = false;
      const end = () => {
        if (ended) return;
        ended = true;
        if (this.stream === req) {
          this.stream = null;
          this.onClose();
        }
      };
      const req = request({ host: this.base.hostname, port: this.base.port, path, method: 'GET', headers: { ...headers } }, (res) => {
        if (res.statusCode !== 200) {
          const chunks: Buffer[] = [];
          res.on('data', (c) => chunks.push(c));
          res.on('end', () => reject(refusal(res.statusCode ?? 0, Buffer.concat(chunks).toString('utf8'))));
          return;
        }
        res.socket.setNoDelay(true);
        opened = true;
        this.stream = req;
        res.on('end', end);
        res.on('close', end);
        res.on('error', end);
        let pending: Buffer = Buffer.alloc(0);
        res.on('data', (chunk: Buffer) => {
          pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
          while (pending.length >= 4) {
            const length = pending.readUInt32BE(0);
            if (pending.length < 4 + length) break;
            const bytes = new Uint8Array(pending.subarray(4, 4 + length));
            pending = pending.subarray(4 + length);
            this.onEnvelope(bytes);
          }
        });
        resolve();
      });
      req.on('error', (err) => (opened ? end() : reject(new HubUnreachableError(this.base.origin, err))));
      req.end();
    });
  }

  /** Sends one envelope; the hub pushes it or queues it for an offline recipient. */
  send(bytes: Uint8Array): Promise<'delivered' | 'queued'> {
    return new Promise((resolve, reject) => {
      const req = request(
        { host: this.base.hostname, port: this.base.port, path: '/relay/v2/send', method: 'POST', agent: this.agent, headers: { 'content-type': 'application/cbor', 'content-length': bytes.length } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            if (res.statusCode === 202) resolve(JSON.parse(text).outcome);
            else reject(refusal(res.statusCode ?? 0, text));
          });
        },
      );
      req.setNoDelay(true);
      req.on('error', (err) => reject(new HubUnreachableError(this.base.origin, err)));
      req.end(bytes);
    });
  }

  get connected(): boolean {
    return this.stream !== null;
  }

  close(): void {
    const stream = this.stream;
    this.stream = null;
    stream?.destroy();
    this.agent.destroy();
  }
}

function refusal(status: number, text: string): HubRefusedError {
  try {
    const e = JSON.parse(text).error;
    return new HubRefusedError(status, e.code, e.message);
  } catch {
    return new HubRefusedError(status, `HTTP_${status}`, text.slice(0, 200));
  }
}
