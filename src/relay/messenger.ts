// A node's end-to-end messaging (SPEC §8, WIRE §4): publishes its signed encryption key set to the hub,
// keeps one push stream open (reconnecting), opens each arriving envelope (signature under the sender's
// KEL, which the message's KEL copy may move forward; replayed and expired ones refused) and hands it to
// the handler of its type through the RxJS bus; seals and sends messages to peers by their key sets.
// The hub keeps each envelope until the node acknowledges it (issue 19): a message is acknowledged once
// its handler has resolved — every handler resolves after its durable step (the provider's RECEIVED and
// admission, the caller's task record, the card fetch's reply event; work that may take long, a service
// call or the local agent, runs apart after that step) — and the store is synced (ReplayGuard.commit), or
// once it was refused for good (replayed, expired, undecryptable, not for us: sending it again cannot
// help). A handler that fails leaves its message unacknowledged and its mid forgotten, so the copy the hub
// pushes again (at the next stream, or after a restart) is handled afresh; one that fails on it again
// lets it go (acknowledged, counted HANDLER_FAILED).
import type { Log } from '../util/log.js';
import type { CborValue } from '../identity/cbor.js';
import { encodeKel } from '../identity/kel.js';
import type { Identity } from '../identity/store.js';
import type { Store } from '../../store/db.js';
import type { HubClient } from '../hub-client/client.js';
import { HubRefusedError } from '../hub-client/client.js';
import type { Reader } from '../reader/reader.js';
import { Bus } from '../bus/bus.js';
import { RelayClient, checkEnvelopeSize } from './client.js';
import { sealEnvelope, openEnvelope, EnvelopeRefused, PROMPT_MESSAGE_TTL_MS, type Received } from '../protocol/envelope.js';
import { currentKeys, signKeySet, verifyKeySet, type PublicEncryptionKey } from './keyset.js';
import { ReplayGuard } from './replay-guard.js';
import type { X25519KeyPair } from '../protocol/hpke.js';

/** A message's lifetime unless the sender says otherwise: long enough for the hub's offline queue. */
export const DEFAULT_TTL_MS = 60_000;
const RECONNECT_MS = [250, 1000, 2000, 5000];
const HOUR = 3_600_000;
/** A peer's key set is fetched again after this long (it may have added a key). */
const PEER_KEYS_MS = HOUR;

export class PeerUnreachableError extends Error {
  override name = 'PeerUnreachableError';
}

/** A message sealed for one peer, not sent yet. */
export interface Sealed {
  bytes: Uint8Array;
  to: string;
  /** Whether it carries our key set (the first message to each peer does). */
  withKeys: boolean;
}

export type MessageHandler = (m: Received & { at: number }) => Promise<void> | void;

export interface MessengerOptions {
  dataDir: string;
  identity: Identity;
  hub: string;
  client: HubClient;
  reader: Reader;
  store: Store;
  now: () => number;
  /** Its lines (src/util/log.ts): info unless a level is given. */
  log: Log;
}

export class Messenger {
  private readonly relay: RelayClient;
  private readonly guard: ReplayGuard;
  private readonly bus: Bus<{ bytes: Uint8Array; at: number; id: string }>;
  /** Mail ids of envelopes taken and not yet handled: a copy pushed again meanwhile waits for the first. */
  private readonly handling = new Set<string>();
  /** Mail ids whose handler failed once since start (bounded). */
  private readonly failedOnce = new Set<string>();
  private readonly handlers = new Map<string, MessageHandler>();
  private ownKeys = new Map<string, X25519KeyPair>();
  private keySet: Uint8Array | null = null;
  private readonly peerKeys = new Map<string, { key: PublicEncryptionKey; until: number }>();
  private readonly keysSentTo = new Set<string>();
  /** Our KEL as it rides on every message (the identity does not change while the messenger runs). */
  private kelBytes: Uint8Array | null = null;
  private closed = false;
  private busStarted = false;
  private attempt = 0;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private renewTimer: NodeJS.Timeout | undefined;
  readonly stats = { received: 0, sent: 0, refused: {} as Record<string, number> };

  /** Envelopes taken from the relay and not yet handled (waiting on the bus or in their handler). */
  get pending(): number {
    return this.handling.size;
  }

  constructor(private readonly opts: MessengerOptions) {
    this.relay = new RelayClient(opts.hub, opts.identity, (bytes, id) => this.arrived(bytes, id), opts.now);
    this.relay.onClose = () => this.scheduleReconnect();
    this.guard = new ReplayGuard(opts.store);
    // What the acknowledged messages did is on disk before the hub may forget them.
    this.relay.beforeAck = () => this.guard.commit();
    this.relay.log = opts.log;
    this.bus = new Bus({
      concurrency: 32,
      maxBacklog: 10_000,
      onError: (err) => opts.log(`message handler failed: ${(err as Error).message}`, 'error'),
    });
  }

  /** Registers the handler of one message type (a message of a type with no handler is dropped). */
  on(type: string, handler: MessageHandler): void {
    this.handlers.set(type, handler);
  }

  /** Publishes our key set and opens the push stream; throws when the hub cannot be reached or refuses. */
  async start(): Promise<void> {
    await this.renewKeys(true);
    if (!this.busStarted) {
      // Before the stream: pending marks an earlier version of the guard left (handling a stop cut short)
      // are forgotten with their mids, so that mail is taken again.
      const cut = await this.guard.recover();
      if (cut > 0) this.opts.log(`${cut} message(s) were being handled when the node stopped: taking them again from the hub`);
      this.bus.start(({ bytes, at, id }) => this.receive(bytes, at, id));
    }
    this.busStarted = true;
    await this.relay.connect();
    this.renewTimer = setInterval(
      () => void this.renewKeys(false).catch((err) => this.opts.log(`encryption keys: ${(err as Error).message}`, 'warn')),
      HOUR,
    );
    this.renewTimer.unref();
  }

  get connected(): boolean {
    return this.relay.connected;
  }

  /** Loads (and every 7 days adds) our X25519 keys; publishes the signed set when it changed. */
  private async renewKeys(publish: boolean): Promise<void> {
    const { keys, changed } = await currentKeys(this.opts.dataDir, this.opts.now());
    this.ownKeys = new Map(keys.map((k) => [Buffer.from(k.kid).toString('hex'), k]));
    this.keySet = signKeySet(this.opts.identity, keys);
    this.keysSentTo.clear();
    if (publish || changed) await this.opts.client.putKeys(this.keySet);
    // With a margin: a copy that waited in the backlog past its exp (it was judged by the time it arrived)
    // must still find its mid.
    await this.guard.prune(this.opts.now() - PROMPT_MESSAGE_TTL_MS);
  }

  private scheduleReconnect(): void {
    if (this.closed) return;
    const delay = RECONNECT_MS[Math.min(this.attempt, RECONNECT_MS.length - 1)]!;
    this.attempt++;
    this.reconnectTimer = setTimeout(() => {
      if (this.closed) return;
      this.relay.connect().then(
        () => {
          this.attempt = 0;
          this.opts.log('relay stream reconnected');
        },
        () => this.scheduleReconnect(),
      );
    }, delay);
  }

  private arrived(bytes: Uint8Array, id: string): void {
    if (this.closed) return;
    // The same envelope pushed again (a new stream) while its first copy is handled: that one acks it.
    if (this.handling.has(id)) return;
    this.handling.add(id);
    if (this.bus.publish({ bytes, at: this.opts.now(), id })) return;
    // Not taken and not acknowledged: the hub keeps it and pushes it again on the next stream.
    this.handling.delete(id);
    this.count('BACKLOG_FULL');
  }

  private count(code: string): void {
    this.stats.refused[code] = (this.stats.refused[code] ?? 0) + 1;
  }

  private async receive(bytes: Uint8Array, at: number, id: string): Promise<void> {
    try {
      if (await this.handle(bytes, at, id)) this.relay.ack(id);
    } finally {
      this.handling.delete(id);
    }
  }

  /**
   * Opens and handles one envelope: true when it may be acknowledged (handled, or refused for good);
   * throws when its handler failed (its mid is forgotten, so the copy the hub pushes again is taken).
   */
  private async handle(bytes: Uint8Array, at: number, id: string): Promise<boolean> {
    let m: Received;
    try {
      m = await openEnvelope(bytes, {
        me: this.opts.identity.aid,
        keys: this.ownKeys,
        now: at,
        seen: (mid, exp, ts) => this.guard.seen(mid, exp, ts),
        kelOf: (aid, tail) => this.opts.reader.kel(aid, tail ?? null),
      });
    } catch (err) {
      if (!(err instanceof EnvelopeRefused)) throw err;
      this.count(err.code);
      return true;
    }
    this.stats.received++;
    const handler = this.handlers.get(m.type);
    if (!handler) this.count('UNKNOWN_TYPE');
    else {
      try {
        await handler({ ...m, at });
      } catch (err) {
        // Failing again on the same envelope (pushed again at the next stream), it would fail at every
        // stream for the mailbox TTL, holding a place in the mailbox: the second failure lets it go.
        if (this.failedOnce.delete(id)) {
          this.count('HANDLER_FAILED');
          this.opts.log(`a ${m.type} message failed twice in its handler and was dropped: ${(err as Error).message}`, 'warn');
        } else {
          if (this.failedOnce.size >= 10_000) this.failedOnce.clear();
          this.failedOnce.add(id);
          this.guard.release(m.mid);
          throw err;
        }
      }
    }
    this.guard.done(m.mid);
    return true;
  }

  /** The encryption key to seal a message to `aid` with: the newest valid key of its signed set. */
  private async recipientKey(aid: string): Promise<PublicEncryptionKey> {
    const now = this.opts.now();
    const cached = this.peerKeys.get(aid);
    if (cached && now < cached.until) return cached.key;
    let set: Uint8Array;
    try {
      set = await this.opts.client.keys(aid);
    } catch (err) {
      if (err instanceof HubRefusedError)
        throw new PeerUnreachableError(`${aid} has published no encryption keys on the hub (${err.code})`);
      throw err;
    }
    const keys = await this.verifiedKeys(aid, set, now);
    const key = keys[0];
    if (!key) throw new PeerUnreachableError(`${aid} has no encryption key valid now`);
    this.peerKeys.set(aid, { key, until: Math.min(now + PEER_KEYS_MS, key.notAfter) });
    return key;
  }

  /** Verifies a key set under the peer's KEL, taking the hub's newer KEL once if the peer rotated. */
  private async verifiedKeys(aid: string, set: Uint8Array, now: number): Promise<PublicEncryptionKey[]> {
    const stored = await this.opts.reader.kel(aid);
    if (stored) {
      try {
        return verifyKeySet(set, stored, now);
      } catch {
        // Perhaps signed after a rotation we have not seen: take the hub's KEL if it extends ours.
      }
    }
    const fresh = await this.opts.reader.refreshKel(aid);
    if (!fresh) throw new PeerUnreachableError(`no valid KEL is known for ${aid}`);
    try {
      return verifyKeySet(set, fresh, now);
    } catch (err) {
      throw new PeerUnreachableError(`the key set of ${aid} does not verify: ${(err as Error).message}`);
    }
  }

  /** Seals and sends one message; resolves when the hub has taken it (pushed or queued). */
  async send(to: string, type: string, body: CborValue, opts: { ix?: number; ttlMs?: number } = {}): Promise<'delivered' | 'queued'> {
    return this.deliver(await this.seal(to, type, body, opts));
  }

  /** Our KEL's bytes, encoded at the first message. */
  private ownKel(identity: Identity): Uint8Array {
    this.kelBytes ??= encodeKel(identity.kel.events);
    return this.kelBytes;
  }

  /**
   * Seals one message without sending it: a reply can be sealed while the journal write it must wait
   * for is under way, so the CPU work overlaps the fsync.
   */
  async seal(to: string, type: string, body: CborValue, opts: { ix?: number; ttlMs?: number } = {}): Promise<Sealed> {
    const key = await this.recipientKey(to);
    const now = this.opts.now();
    const { identity } = this.opts;
    const withKeys = this.keySet !== null && !this.keysSentTo.has(to);
    const { bytes } = sealEnvelope(
      { aid: identity.aid, ksn: identity.kel.ksn, signer: identity.signer },
      { aid: to, kid: key.kid, publicKey: key.publicKey },
      {
        type,
        ix: opts.ix ?? 0,
        ts: now,
        exp: now + (opts.ttlMs ?? DEFAULT_TTL_MS),
        body,
        kel: this.ownKel(identity),
        // Our key set rides on the first message to each peer only (it can also fetch it from the hub):
        // on every message it would double the envelope's padded size.
        ...(withKeys ? { keys: this.keySet! } : {}),
      },
    );
    // Refused here, before anything leaves: the hub would answer TOO_LARGE after the whole upload.
    checkEnvelopeSize(bytes);
    return { bytes, to, withKeys };
  }

  /** Sends a sealed message; resolves when the hub has taken it (pushed or queued). */
  async deliver(sealed: Sealed): Promise<'delivered' | 'queued'> {
    const outcome = await this.relay.send(sealed.bytes);
    // Our key set has reached the peer only once a message carrying it was taken by the hub.
    if (sealed.withKeys) this.keysSentTo.add(sealed.to);
    this.stats.sent++;
    return outcome;
  }

  /**
   * Stops taking messages and closes the relay connection, after sending the acks of what was handled
   * (resolves then; await it before closing the store, which the acks' sync writes to).
   */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    clearInterval(this.renewTimer);
    this.bus.stop();
    await this.relay.close();
  }
}
