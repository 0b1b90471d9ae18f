// A node's working parts over one data dir: config, identity, store, actor host, hub client, card reader.
// The daemon holds one for its lifetime; a CLI command without a daemon opens one for the command.
import { readConfig } from '../config/load.js';
import { formatProblem } from '../config/problem.js';
import type { Config } from '../config/schema.js';
import { loadIdentity, type Identity } from '../identity/store.js';
import { Store } from '../../store/db.js';
import { ActorHost } from '../runtime/host.js';
import { HubClient } from '../hub/client.js';
import { Reader, type ReadCard } from '../reader/reader.js';
import { currentCard, publishToHub, readProfile, type OwnCard } from '../card/publish.js';
import { defaultName, type Profile } from '../card/build.js';
import { explain } from '../reasons.js';

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
  reason: string;
  explanation: string;
  prices: { skillId: string; amount: string }[] | null;
  fetchedAt: number | null;
}

export class Node {
  private constructor(
    readonly dataDir: string,
    readonly config: Config,
    readonly identity: Identity,
    readonly store: Store,
    /** The actor host: the daemon runs one; one-shot CLI commands do not need it. */
    readonly host: ActorHost | null,
    readonly client: HubClient,
    readonly reader: Reader,
    private readonly now: () => number,
  ) {}

  static async open(dataDir: string, opts: { runtime?: boolean; now?: () => number } = {}): Promise<Node> {
    const now = opts.now ?? Date.now;
    const { config, problems } = await readConfig(dataDir);
    const errors = problems.filter((p) => p.severity === 'error');
    if (!config || errors.length > 0) {
      throw new ConfigInvalidError(`config.json has ${errors.length} error(s); run \`anet doctor\`:\n${errors.map((p) => formatProblem(p)).join('\n')}`);
    }
    const identity = await loadIdentity(dataDir);
    const store = await Store.open(dataDir);
    try {
      // A daemon's quotas must survive power loss, not only a crash: fsync every batch.
      const host = opts.runtime ? await ActorHost.start(store, { sync: true }) : null;
      const client = new HubClient(config.hub, identity, now);
      return new Node(dataDir, config, identity, store, host, client, new Reader(store, client, now), now);
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

  /** `anet card` (SPEC §6.3–6.4), public-card path. */
  async card(aid: string): Promise<CardView> {
    const read = await this.reader.publicCard(aid);
    const x402 = read.charge !== 'free';
    // Extended cards are fetched only when the public card declares x402 or a contact credential is held.
    const reason = !read.verified ? read.code! : x402 ? 'card_unavailable' : 'not_applicable';
    return {
      aid,
      name: read.name,
      verified: read.verified,
      key: read.key,
      charge: read.charge,
      card: read.card,
      skills: read.skills,
      extended: read.verified && !x402 ? 'not_applicable' : null,
      reason,
      explanation: explain(reason),
      prices: null,
      fetchedAt: null,
    };
  }

  async close(): Promise<void> {
    await this.host?.close();
    await this.store.close();
  }
}
