// A node's working parts over one data dir: config, identity, store, actor host, hub client, card reader.
// The daemon holds one for its lifetime; a CLI command without a daemon opens one for the command.
import { readConfig } from '../config/load.js';
import { formatProblem } from '../config/problem.js';
import type { Config } from '../config/schema.js';
import { loadIdentity, type Identity } from '../identity/store.js';
import { Store } from '../../store/db.js';
import { ActorHost } from '../runtime/host.js';
import { systemClock, type Clock } from '../runtime/clock.js';
import { HubClient, HubRefusedError } from '../hub-client/client.js';
import { Reader, type ReadCard } from '../reader/reader.js';
import { currentCard, publishToHub, readProfile, type OwnCard } from '../card/publish.js';
import { defaultName, type Profile } from '../card/build.js';
import { explain } from '../protocol/reasons.js';
import { Messenger } from '../relay/messenger.js';
import { CardFetcher, type ExtendedResult } from '../reader/fetch.js';
import { cardDesk, renewCredentials } from '../card/desk.js';
import { CARD_REQUEST, CARD_REPLY, CONTACT_CREDENTIAL } from '../protocol/messages.js';
import { Provider } from './provider/calls.js';
import { TASK_SEND, TASK_STATUS, TASK_RESULT } from '../protocol/messages.js';
import type { NodeParts } from './parts.js';
import { inbox, replyToInbox, type InboxEntry } from './provider/text.js';
import { Caller } from './caller/index.js';
import { TASK_PAY, TASK_CANCEL } from '../protocol/messages.js';
import { Payer, type SignedPrice } from './caller/payment.js';
import { pricesOf } from '../card/extended.js';
import { cardPayload } from '../protocol/card/jws.js';
import { publicSeqOf } from '../reader/fetch.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { setMaxListeners } from 'node:events';
import { NodeMetrics } from './metrics.js';
import { offeredCapabilities } from '../config/check.js';
import type { Log } from '../util/log.js';

export class ConfigInvalidError extends Error {
  override name = 'ConfigInvalidError';
}

export interface CardView {
  aid: string;
  name: string;
  verified: boolean;
  key: string;
  charge: string;
  card: unknown;
  skills: string[];
  extended: 'ok' | 'not_applicable' | 'not_configured' | null;
  reason: string | null;
  explanation: string;
  prices: { skillId: string; amount: string }[] | null;
  fetchedAt: number | null;
  /** The extended answer shown is for an older public seq: the newest could not be obtained. */
  stale: boolean;
  /** Set when nothing was asked now (the 60 s guard holds): the last attempt, and when the next may be. */
  lastAttemptAt: number | null;
  nextAttemptAt: number | null;
}

export interface NodeOptions {
  /** Start the actor host now (the daemon); otherwise it starts when first needed. */
  runtime?: boolean;
  /** Time for the node (tests drive it); the system clock by default. */
  clock?: Clock;
  log?: Log;
}

export class Node {
  private constructor(
    readonly dataDir: string,
    readonly config: Config,
    readonly identity: Identity,
    readonly store: Store,
    /** The actor host: the daemon starts one at once; a one-shot CLI command only when it needs one. */
    private runtime: ActorHost | null,
    readonly client: HubClient,
    readonly reader: Reader,
    private readonly clock: Clock,
    private readonly log: Log,
  ) {
    this.now = () => clock.now();
    this.metrics = new NodeMetrics(
      offeredCapabilities(config).map((c) => c.id),
      {
        host: () => this.runtime,
        relay: () => (this.openMessenger ? { ...this.openMessenger.stats, pending: this.openMessenger.pending } : null),
      },
    );
    store.onJournalBatch = (seconds, entries) => this.metrics.journalWritten(seconds, entries);
    this.fetcher = new CardFetcher({
      me: identity.aid,
      host: () => this.actors(),
      messenger: () => this.network(),
      reader,
      store,
      now: this.now,
    });
    const payer = new Payer({
      identity,
      store,
      reader,
      host: () => this.actors(),
      messenger: () => this.network(),
      now: this.now,
      payments: config.payments,
      hubAid: () => this.hubAid(),
      signedPrice: (aid, skill) => this.signedPrice(aid, skill),
    });
    this.caller = new Caller({
      me: identity.aid,
      store,
      reader,
      messenger: () => this.network(),
      now: this.now,
      payer,
      clock,
      hub: client.base,
    });
  }

  readonly caller: Caller;
  /** Its Prometheus metrics: served by the daemon (src/daemon/control.ts `GET /metrics`, `--metrics`). */
  readonly metrics: NodeMetrics;
  private readonly stopping = stopSignal();
  private parts: NodeParts | null = null;

  /** Text tasks waiting for the operator (SPEC §9.2). */
  inbox(): Promise<InboxEntry[]> {
    return inbox({ store: this.store });
  }

  /** `anet reply`: answers a text task from the inbox. */
  async reply(task: string, text: string): Promise<InboxEntry> {
    await this.network();
    return replyToInbox(this.parts!, task, text);
  }

  readonly now: () => number;

  readonly fetcher: CardFetcher;
  private messenger: Promise<Messenger> | null = null;
  private hubAidCache: Promise<string> | null = null;

  get host(): ActorHost | null {
    return this.runtime;
  }

  /** The actor host, started on first use. */
  async actors(): Promise<ActorHost> {
    // A daemon's quotas must survive power loss, not only a crash: fsync every batch.
    this.runtime ??= await ActorHost.start(this.store, { sync: true, clock: this.clock });
    return this.runtime;
  }

  /** The hub's AID (prices name its ledger), asked once. */
  hubAid(): Promise<string> {
    this.hubAidCache ??= this.client.health().then((h) => h.aid);
    this.hubAidCache.catch(() => (this.hubAidCache = null));
    return this.hubAidCache;
  }

  /**
   * The relay messenger, started on first use: publishes our encryption keys, opens the push stream,
   * answers card requests and takes card replies. Needs the node to be registered with its hub.
   */
  network(): Promise<Messenger> {
    this.messenger ??= this.startNetwork();
    this.messenger.catch(() => (this.messenger = null));
    return this.messenger;
  }

  /** The relay stream's state and message counters, for `status`. */
  relayStatus(): { connected: boolean; received: number; sent: number; refused: Record<string, number> } | null {
    return this.openMessenger ? { connected: this.openMessenger.connected, ...this.openMessenger.stats } : null;
  }

  private openMessenger: Messenger | null = null;

  private async startNetwork(): Promise<Messenger> {
    const host = await this.actors();
    const messenger = new Messenger({
      dataDir: this.dataDir,
      identity: this.identity,
      hub: this.config.hub,
      client: this.client,
      reader: this.reader,
      store: this.store,
      now: this.now,
      log: this.log,
    });
    const parts: NodeParts = {
      dataDir: this.dataDir,
      config: this.config,
      identity: this.identity,
      store: this.store,
      host,
      messenger,
      client: this.client,
      now: this.now,
      log: this.log,
      hubAid: () => this.hubAid(),
      stopping: this.stopping.signal,
      metrics: this.metrics,
    };
    this.parts = parts;
    messenger.on(CARD_REQUEST, cardDesk(parts));
    messenger.on(CARD_REPLY, this.fetcher.onReply());
    messenger.on(CONTACT_CREDENTIAL, this.fetcher.onCredential());
    // The provider role: owns its admission gates and the quotes waiting for payment.
    const provider = new Provider(parts);
    messenger.on(TASK_SEND, provider.onSend);
    messenger.on(TASK_PAY, provider.onPay);
    messenger.on(TASK_CANCEL, provider.onCancel);
    messenger.on(TASK_STATUS, this.caller.onReply());
    messenger.on(TASK_RESULT, this.caller.onReply());
    // Before the stream delivers anything: in-flight counts start empty and stopped calls end interrupted.
    const interrupted = await provider.interruptRunning();
    try {
      await messenger.start().catch(async (err) => {
        // Never registered (a one-shot `anet card` on a node whose daemon never ran): register, then retry.
        if (!(err instanceof HubRefusedError && err.code === 'UNKNOWN_AID')) throw err;
        await this.publish();
        await messenger.start();
      });
      this.openMessenger = messenger;
      if (interrupted.told.length > 0)
        this.log(`${interrupted.told.length} call(s) were running when the node stopped: ended interrupted; telling their callers`);
      if (interrupted.told.length > 0 || interrupted.ended.length > 0) void provider.tellInterrupted(interrupted.told, interrupted.ended);
      if (interrupted.settle.length > 0) {
        this.log(`${interrupted.settle.length} paid call(s) still owe the hub a settlement: settling, then answering their callers`);
        void provider.resumeSettlements(interrupted.settle);
      }
      void this.caller.resume().then(
        (n) => n > 0 && this.log(`${n} task(s) not answered yet: sending them again on the resend schedule`),
        (err) => this.log(`resuming task resends: ${(err as Error).message}`, 'error'),
      );
      void this.caller.resendPayments().then(
        (n) => n > 0 && this.log(`sent ${n} authorized payment(s) again after the restart`),
        (err) => this.log(`sending payments again: ${(err as Error).message}`, 'error'),
      );
      void renewCredentials(parts).then(
        (n) => n > 0 && this.log(`renewed ${n} contact credential(s) after the key rotation`),
        (err) => this.log(`renewing contact credentials: ${(err as Error).message}`, 'warn'),
      );
    } catch (err) {
      await messenger.close();
      throw err;
    }
    return messenger;
  }

  static async open(dataDir: string, opts: NodeOptions = {}): Promise<Node> {
    const clock = opts.clock ?? systemClock;
    const now = () => clock.now();
    const { config, problems } = await readConfig(dataDir);
    const errors = problems.filter((p) => p.severity === 'error');
    if (!config || errors.length > 0) {
      throw new ConfigInvalidError(
        `config.json has ${errors.length} error(s); run \`anet doctor\`:\n${errors.map((p) => formatProblem(p)).join('\n')}`,
      );
    }
    const identity = await loadIdentity(dataDir);
    const store = await Store.open(dataDir);
    try {
      const client = new HubClient(config.hub, identity, now);
      const node = new Node(dataDir, config, identity, store, null, client, new Reader(store, client, now), clock, opts.log ?? (() => {}));
      if (opts.runtime) await node.actors();
      return node;
    } catch (err) {
      await store.close();
      throw err;
    }
  }

  /** Our card for the current config and profile (re-signed only when its content changed). */
  async ownCard(profile?: Profile): Promise<OwnCard> {
    return currentCard(this.store, this.config, profile ?? (await readProfile(this.dataDir)), this.identity, this.now());
  }

  async publish(): Promise<{ own: OwnCard; outcome: 'published' | 'withdrawn' }> {
    const profile = await readProfile(this.dataDir);
    const own = await this.ownCard(profile);
    const outcome = await publishToHub(this.client, own, profile.name || defaultName(this.identity.aid));
    return { own, outcome };
  }

  async find(args: { q?: string; skill?: string; tag?: string; limit?: number }): Promise<ReadCard[]> {
    return this.reader.find(args);
  }

  /** `anet card` (SPEC §6.3–6.4): the public card, and the extended card when §6.1 allows a fetch. */
  async card(aid: string): Promise<CardView> {
    const read = await this.reader.publicCard(aid);
    const ext: ExtendedResult = read.verified ? await this.fetcher.extended(read) : NOT_READ;
    const card = ext.card ?? read.card;
    // An older card shown in place of the newest has its own reason, so no surface mistakes it for current.
    const reason = !read.verified ? read.code! : ext.stale ? 'card_stale' : ext.reason;
    this.metrics.cardFetched(reason ?? 'ok');
    const explanation = [
      reason ? explain(reason) : pricesSentence(ext.fetchedAt!),
      ext.stale ? staleSentence(publicSeqOf(ext.card), publicSeqOf(read.card)) : '',
      ext.nextAttemptAt !== null ? attemptSentence(ext.lastAttemptAt!, ext.nextAttemptAt, this.now()) : '',
    ];
    return {
      aid,
      name: read.name,
      verified: read.verified,
      key: read.key,
      charge: read.charge,
      card,
      skills: ext.card ? ext.card.skills.map((s) => s.id) : read.skills,
      extended: ext.extended,
      reason,
      explanation: explanation.filter(Boolean).join(' '),
      prices: ext.prices,
      fetchedAt: ext.fetchedAt,
      stale: ext.stale,
      lastAttemptAt: ext.lastAttemptAt,
      nextAttemptAt: ext.nextAttemptAt,
    };
  }

  /**
   * The provider's signed price for a skill (SPEC §10): from its verified extended card, fetched under the
   * §6.1–6.2 rules (cache, 60 s guard) when not held. Never from the hub or the public card.
   */
  async signedPrice(aid: string, skillId: string): Promise<SignedPrice | { why: string }> {
    const read = await this.reader.publicCard(aid);
    if (!read.verified) return { why: `its public card does not verify (${read.code})` };
    const ext = await this.fetcher.extended(read);
    if (ext.extended !== 'ok' || !ext.card) return { why: explain(ext.reason ?? 'card_unavailable') };
    const prices = pricesOf(ext.card);
    if ('error' in prices) return { why: prices.error };
    const price = prices.prices.find((p) => p.skillId === skillId);
    if (!price) return { why: `its signed extended card has no price for ${skillId}` };
    // The digest of what the provider signed (kept since the fetch), so the audit names a card it holds.
    const digest = ext.digest ?? Buffer.from(sha256(Buffer.from(cardPayload(ext.card)))).toString('hex');
    const seq = publicSeqOf(ext.card) ?? '';
    return {
      amount: price.amount,
      network: prices.network,
      asset: prices.asset,
      seq,
      digest,
      fetchedAt: ext.fetchedAt!,
      ...(ext.stale ? { stale: true, publicSeq: publicSeqOf(read.card) ?? '' } : {}),
    };
  }

  async close(): Promise<void> {
    this.stopping.abort();
    this.caller.close();
    const messenger = await this.messenger?.catch(() => null);
    // Before the store closes: the last acknowledgements go out after their synced write.
    await messenger?.close();
    await this.runtime?.close();
    await this.store.close();
  }
}

const NOT_READ: ExtendedResult = {
  extended: null,
  reason: null,
  card: null,
  prices: null,
  fetchedAt: null,
  stale: false,
  lastAttemptAt: null,
  nextAttemptAt: null,
};
const two = (n: number) => String(n).padStart(2, '0');

/** The last line of `anet card` when the extended card was obtained (SPEC §6.4). */
export function pricesSentence(fetchedAt: number): string {
  const d = new Date(fetchedAt);
  const when = `${two(d.getMonth() + 1)}-${two(d.getDate())} ${two(d.getHours())}:${two(d.getMinutes())}`;
  return `Prices are signed by the other side, fetched ${when}; payment follows the quote in the task, and a quote above these prices is not paid automatically.`;
}

/** Which versions a stale answer is between (the reason's sentence says the rest). */
function staleSentence(heldSeq: string | null, publicSeq: string | null): string {
  return heldSeq && publicSeq ? `It extends seq ${heldSeq}; the agent now publishes seq ${publicSeq}.` : '';
}

/** Said when the 60 s guard kept the node from asking (SPEC §6.2): nothing was asked now. */
function attemptSentence(lastAttemptAt: number, nextAttemptAt: number, now: number): string {
  const d = new Date(nextAttemptAt);
  const ago = Math.max(0, Math.round((now - lastAttemptAt) / 1000));
  return `Not asked again now: the agent was last asked ${ago} s ago, and is asked at most once a minute; the next attempt is allowed at ${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}.`;
}

/**
 * The node-wide stop signal. Each running service call listens to it and stops listening when it ends,
 * so listeners are bounded by the in-flight limits, not leaked: without this, more than ten calls at
 * once printed a MaxListenersExceededWarning on the daemon's stderr.
 */
function stopSignal(): AbortController {
  const controller = new AbortController();
  setMaxListeners(0, controller.signal);
  return controller;
}
