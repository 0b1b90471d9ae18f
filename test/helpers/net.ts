// A real hub and real daemons in one process, on loopback and in temporary directories, sharing one
// clock the test can move forward (hub signature windows, guards, caches and credentials all follow it).
import type { ExecutionContext } from 'ava';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { tempDir } from './tmp.js';
import { runCli } from './cli.js';
import { OffsetClock } from './clock.js';
import type { Hub } from '../../src/hub/server.js';
import { startTestHub } from './hub.js';
import { startDaemon, type Daemon } from '../../src/daemon/daemon.js';
import { createIdentity, loadIdentity } from '../../src/identity/store.js';
import { Store } from '../../store/db.js';
import { HubClient } from '../../src/hub-client/client.js';
import { Reader } from '../../src/reader/reader.js';
import { Messenger } from '../../src/relay/messenger.js';
import { fromBody } from '../../src/protocol/body.js';
import { CARD_REPLY } from '../../src/protocol/messages.js';
import { TASK_STATUS, TASK_RESULT } from '../../src/protocol/messages.js';

export interface Net {
  root: string;
  hub: Hub;
  clock: OffsetClock;
  /** Envelopes the hub relay has taken so far (pushed, queued or dropped). */
  envelopes(): number;
  /** A data dir with an identity and this config (the hub filled in). */
  node(name: string, config?: Record<string, unknown>): Promise<{ dir: string; aid: string }>;
  configure(dir: string, config: Record<string, unknown>): Promise<void>;
  /** Starts a daemon and waits until its card is published and its relay stream is open. */
  start(dir: string): Promise<Daemon>;
  /** The lines a daemon started here has logged so far. */
  log(daemon: Daemon): readonly string[];
}

/** `hub`: how to start the net's hub in its data dir (default: startTestHub, on this run's backend). */
export async function startNet(
  t: ExecutionContext,
  opts: { hub?: (dataDir: string, now: () => number) => Promise<Hub> } = {},
): Promise<Net> {
  const root = await tempDir(t);
  const clock = new OffsetClock();
  const now = () => clock.now();
  const hub = await (opts.hub ?? ((dataDir) => startTestHub({ dataDir, port: 0, now })))(join(root, 'hub'), now);
  const daemons: Daemon[] = [];
  const logs = new WeakMap<Daemon, string[]>();
  t.teardown(async () => {
    for (const d of [...daemons]) await d.close().catch(() => {});
    await hub.close();
  });
  const net: Net = {
    root,
    hub,
    clock,
    envelopes: () => hub.relay.stats.delivered + hub.relay.stats.queued + hub.relay.stats.dropped,
    async configure(dir, config) {
      await writeFile(join(dir, 'config.json'), JSON.stringify({ hub: hub.url, ...config }));
    },
    async node(name, config = {}) {
      const dir = join(root, name);
      const init = await runCli(['init', '--data', dir, '--json']);
      if (init.code !== 0) throw new Error(init.stderr);
      await net.configure(dir, config);
      return { dir, aid: JSON.parse(init.stdout).aid };
    },
    async start(dir) {
      const lines: string[] = [];
      const daemon = await startDaemon(dir, (l) => lines.push(l), { clock });
      daemons.push(daemon);
      logs.set(daemon, lines);
      await daemon.published;
      if (!lines.some((l) => l.startsWith('relay stream open')))
        throw new Error(`daemon in ${dir} did not open its relay stream:\n${lines.join('\n')}`);
      const close = daemon.close;
      daemon.close = async () => {
        daemons.splice(daemons.indexOf(daemon), 1);
        await close();
      };
      return daemon;
    },
    log: (daemon) => logs.get(daemon) ?? [],
  };
  return net;
}

/** A provider config: each capability served by a socket path that need not exist (cards only). */
export function providerConfig(
  caps: { id: string; price?: number | string; allow_only?: boolean; description?: string }[],
  policy: 'open' | 'closed' = 'closed',
) {
  return {
    inbound: { policy, public_capabilities: caps.map((c) => ({ id: c.id, ...(c.allow_only ? { allow_only: true } : {}) })) },
    modules: {
      service: {
        capabilities: caps.map((c) => ({
          id: c.id,
          url: `unix:///run/anet-test/${c.id}.sock`,
          ...(c.price !== undefined ? { price: c.price } : {}),
          ...(c.description ? { description: c.description } : {}),
        })),
      },
    },
  };
}

/**
 * A bare peer made of the node's own parts (identity, hub client, reader, messenger) with no card desk or
 * fetcher: a test drives it to send raw messages, as another implementation — or a misbehaving one — would.
 */
export async function rawPeer(t: ExecutionContext, net: Net, name: string, opts: { identityOf?: string; connect?: boolean } = {}) {
  const dir = opts.identityOf ?? join(net.root, name);
  if (!opts.identityOf) await createIdentity(dir, net.clock.now());
  const identity = await loadIdentity(dir);
  const storeDir = join(net.root, `${name}-raw-store`);
  const store = await Store.open(storeDir);
  const now = () => net.clock.now();
  const client = new HubClient(net.hub.url, identity, now);
  if (!opts.identityOf) await client.register(name, null);
  const reader = new Reader(store, client, now);
  const messenger = new Messenger({
    dataDir: opts.identityOf ? storeDir : dir,
    identity,
    hub: net.hub.url,
    client,
    reader,
    store,
    now,
    log: () => {},
  });
  const received: { type: string; body: Record<string, unknown>; raw: unknown }[] = [];
  for (const type of [CARD_REPLY, TASK_STATUS, TASK_RESULT])
    messenger.on(type, (m) => void received.push({ type: m.type, body: fromBody(m.body) ?? {}, raw: m.body }));
  if (opts.connect ?? !opts.identityOf) await messenger.start();
  t.teardown(async () => {
    await messenger.close();
    await store.close();
  });
  return { aid: identity.aid, identity, messenger, received };
}
