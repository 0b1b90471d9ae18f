// Hub replicas hand each other envelopes on NATS (issue 19, `anet hub start --db … --bus nats://…`). The
// replica holding a node's push stream subscribes to that node's subject; the replica that accepted an
// envelope for it (and kept it in the shared mailbox first) asks there for a push. NATS is only the fast
// path: every accepted envelope is already in the shared mailbox, so a lost NATS message delays an
// envelope (until a mail notice, a reconnect of the bus, or the node's next attach flushes it) but never
// loses it.
//
// Subjects (AIDs are base32, valid subject tokens): `anet.relay.1.push.<aid>` (request: the envelope;
// reply `1` pushed, `0` not), `anet.relay.1.mail.<aid>` (mail was kept for it: list the mailbox and push
// what this stream has not had). Nothing on the bus names a sender: the subject is the recipient, the
// payload the sealed envelope the hub already holds.
import { connect, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import type { RelayBus } from './relay.js';

const PUSH = 'anet.relay.1.push';
const MAIL = 'anet.relay.1.mail';
/** How long the accepting replica waits for the holding one to push (it is kept in any case). */
const PUSH_TIMEOUT_MS = 2000;
const YES = new Uint8Array([0x31]);
const NO = new Uint8Array([0x30]);

/** A `--bus` that could not be reached. */
export class BusUnreachable extends Error {
  override name = 'BusUnreachable';
}

interface Held {
  push: (bytes: Uint8Array) => boolean;
  flush: () => void;
  subs: Subscription[];
}

export class NatsBus implements RelayBus {
  private readonly held = new Map<string, Held>();

  private constructor(private readonly nc: NatsConnection) {
    void this.watch();
  }

  /** Connects to the NATS at `url` (retrying for ever once connected: a bus outage only slows delivery). */
  static async connect(url: string, name: string): Promise<NatsBus> {
    try {
      const nc = await connect({ servers: url, name, maxReconnectAttempts: -1, reconnectTimeWait: 500, timeout: 5000 });
      return new NatsBus(nc);
    } catch (err) {
      throw new BusUnreachable(`cannot reach the bus at ${url} (${(err as Error).message}): start nats-server there, or correct --bus`);
    }
  }

  /** Asks the replica holding `to`'s stream to push `bytes`: true when one did. */
  async deliver(to: string, bytes: Uint8Array): Promise<boolean> {
    try {
      const reply = await this.nc.request(`${PUSH}.${to}`, bytes, { timeout: PUSH_TIMEOUT_MS });
      return reply.data.length === 1 && reply.data[0] === YES[0];
    } catch {
      // No responders (no replica holds the stream), a timeout, the bus down: the envelope stays kept.
      return false;
    }
  }

  /** This replica holds `to`'s stream: pushes and mail notices for it come here until the release. */
  hold(to: string, push: (bytes: Uint8Array) => boolean, flush: () => void): () => void {
    for (const s of this.held.get(to)?.subs ?? []) s.unsubscribe();
    const subs = [
      this.nc.subscribe(`${PUSH}.${to}`, {
        callback: (err, msg) => {
          if (err) return;
          msg.respond(push(msg.data) ? YES : NO);
        },
      }),
      this.nc.subscribe(`${MAIL}.${to}`, { callback: (err) => void (err || flush()) }),
    ];
    const held: Held = { push, flush, subs };
    this.held.set(to, held);
    // Once the server has the subscription, list the mailbox again: an envelope kept by another replica
    // whose push request reached the server before it (no responders then) is found by this listing,
    // since it was kept before that request was sent.
    this.nc
      .flush()
      .then(() => this.held.get(to) === held && flush())
      .catch(() => {});
    return () => {
      if (this.held.get(to) !== held) return;
      this.held.delete(to);
      for (const s of subs) s.unsubscribe();
    };
  }

  /** Tells the replica holding `to`'s stream, if any, that mail was kept for it. */
  mail(to: string): void {
    try {
      this.nc.publish(`${MAIL}.${to}`);
    } catch {
      // The bus is closing or down: the stream's next flush (reconnect, attach) finds the mail.
    }
  }

  /** After the bus comes back, every stream held here is flushed: notices sent meanwhile were lost. */
  private async watch(): Promise<void> {
    for await (const s of this.nc.status()) {
      if (s.type === 'reconnect') for (const h of this.held.values()) h.flush();
    }
  }

  async close(): Promise<void> {
    this.held.clear();
    if (!this.nc.isClosed()) await this.nc.drain().catch(() => this.nc.close());
  }
}
