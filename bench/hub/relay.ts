// bench/hub, relay: sealed envelopes (real HPKE envelopes to a recipient with published keys) sent on one
// upstream, 32 awaiting their answers at once, to a recipient reading its push stream; msgs/s from the
// first send until the recipient has every one, and the hub processes' CPU (process.cpuUsage in each hub
// process, all its threads) per message. 1 replica on LevelDB, 1 on PostgreSQL, and 2 replicas on one
// PostgreSQL and a nats-server: sends to replica 1, the recipient's stream on replica 2.
import { cp, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Identity } from '../../src/identity/store.js';
import { sealEnvelope } from '../../src/protocol/envelope.js';
import { generateX25519 } from '../../src/protocol/hpke.js';
import { signRequest } from '../../src/protocol/hub-auth.js';
import { signKeySet } from '../../src/protocol/keyset.js';
import { HubRefusedError } from '../../src/hub-client/client.js';
import { RelayClient } from '../../src/relay/client.js';
import { postRate } from './baseline.js';
import { type Child, childHub, http, keepAlive, median, memoryIdentity, pool, register } from './common.js';

export interface RelayFigures {
  config: string;
  rounds: { perSec: number; cpuUs: number; base: number; baseCpuUs: number; retries: number }[];
  /** Why it did not run through, when it did not. */
  failed: string | null;
}

/** A configuration that has not finished after this long is reported stuck, where it was. */
const STUCK_MS = 150_000;

/** Registers `who` and publishes a key set for `key` (so the hub keeps mail for it, on any replica). */
async function recipientOn(url: string, who: Identity, kid: Uint8Array, publicKey: Uint8Array): Promise<void> {
  const agent = keepAlive(1);
  await register(agent, url, who, 'bench-recipient');
  const now = Date.now();
  const set = signKeySet(who, [{ kid, publicKey, notBefore: now - 60_000, notAfter: now + 86_400_000 }]);
  const path = `/agents/${who.aid}/keys`;
  const headers = { 'content-type': 'application/cbor', ...signRequest(who.signer, who.aid, 'PUT', path, set, now) };
  const r = await http(agent, url, 'PUT', path, set, headers as unknown as Record<string, string>);
  agent.destroy();
  if (r.status !== 200) throw new Error(`PUT ${path}: ${r.status} ${r.body.toString('utf8').slice(0, 200)}`);
}

/** Runs `rounds` rounds (each after its baseline) of `n` envelopes from `sendHub` to a stream on `recvHub`. */
async function run(
  config: string,
  hubs: Child[],
  sendHub: Child,
  recvHub: Child,
  plain: Child,
  n: number,
  rounds: number,
): Promise<RelayFigures> {
  const figures: RelayFigures = { config, rounds: [], failed: null };
  const sender = memoryIdentity();
  const recipient = memoryIdentity();
  const key = generateX25519();
  const kid = new Uint8Array(16).fill(7);
  // Where the run is, for the line that says why it stopped (a stuck step is reported, not waited on).
  let step = 'registering the recipient and publishing its keys';
  let sent = 0;
  let answered = 0;
  let arrived = 0;
  let wake: (() => void) | null = null;
  // The recipient acknowledges each envelope, as a node does once it journaled it (acks go in batches).
  const receiver: RelayClient = new RelayClient(recvHub.url, recipient, (_bytes, id) => {
    arrived++;
    receiver.ack(id);
    wake?.();
  });
  const out = new RelayClient(sendHub.url, sender, () => {});
  const seal = (k: number) =>
    Array.from(
      { length: k },
      (_, i) =>
        sealEnvelope(
          { aid: sender.aid, ksn: 0, signer: sender.signer },
          { aid: recipient.aid, kid, publicKey: key.publicKey },
          { type: 'bench', ix: i, ts: Date.now(), exp: Date.now() + 600_000, body: 'x'.repeat(300) },
        ).bytes,
    );
  /** Sends `envelopes` 32 at once; resolves when all arrived (or rejects after 60 s without progress). */
  const through = async (envelopes: Uint8Array[]) => {
    const want = arrived + envelopes.length;
    const all = new Promise<void>((resolve, reject) => {
      let last = arrived;
      const check = setInterval(() => {
        if (arrived === last) {
          clearInterval(check);
          reject(
            new Error(
              `${want - arrived} of ${envelopes.length} envelopes did not arrive within 60 s (sent to ${sendHub.url}, stream on ${recvHub.url})`,
            ),
          );
        }
        last = arrived;
      }, 60_000);
      wake = () => {
        if (arrived >= want) {
          clearInterval(check);
          resolve();
        }
      };
    });
    all.catch(() => {});
    await pool(envelopes.length, 32, (i) => sendOne(envelopes[i]!));
    await all;
  };
  /** A send the hub answers QUEUE_FULL (the recipient's mailbox at its bound) is sent again shortly, as asked. */
  let retries = 0;
  const sendOne = async (bytes: Uint8Array): Promise<void> => {
    for (;;) {
      try {
        sent++;
        await out.send(bytes);
        answered++;
        return;
      } catch (err) {
        if (!(err instanceof HubRefusedError && err.code === 'QUEUE_FULL') || ++retries > 100_000) throw err;
        await new Promise((r) => setTimeout(r, 10));
      }
    }
  };
  const body = async () => {
    await recipientOn(sendHub.url, recipient, kid, key.publicKey);
    step = "opening the recipient's stream";
    await receiver.connect();
    step = 'warm-up: 200 envelopes';
    await through(seal(200)); // warm-up, and the upstream opened
    for (let r = 0; r < rounds; r++) {
      step = `round ${r + 1}: baseline`;
      const base = await postRate(plain, n, 32);
      const envelopes = seal(n);
      const cpu0 = await Promise.all(hubs.map((h) => h.cpu()));
      retries = 0;
      step = `round ${r + 1}: ${n} envelopes`;
      const t0 = performance.now();
      await through(envelopes);
      const perSec = n / ((performance.now() - t0) / 1000);
      // The hub's CPU counts the acks too: sent now, as a node sends the last batch.
      step = `round ${r + 1}: the last acks`;
      await receiver.flushAcks();
      const cpu1 = await Promise.all(hubs.map((h) => h.cpu()));
      const cpuUs = cpu1.reduce((s, c, i) => s + c - cpu0[i]!, 0) / n;
      figures.rounds.push({ perSec, cpuUs, base: base.perSec, baseCpuUs: base.cpuUs, retries });
    }
  };
  let timer: NodeJS.Timeout | undefined;
  const stuck = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new Error(`no end after ${STUCK_MS / 1000} s, at: ${step} (envelopes sent ${sent}, answered ${answered}, arrived ${arrived})`),
        ),
      STUCK_MS,
    );
  });
  try {
    await Promise.race([body(), stuck]);
  } catch (err) {
    figures.failed = (err as Error).message;
  } finally {
    clearTimeout(timer);
    out.close();
    await receiver.close();
  }
  return figures;
}

export async function benchRelayLevel(root: string, plain: Child, n: number, rounds: number): Promise<RelayFigures> {
  const hub = await childHub({ dataDir: join(root, 'relay-level') });
  try {
    return await run('1 replica, LevelDB', [hub], hub, hub, plain, n, rounds);
  } finally {
    await hub.stop();
  }
}

export async function benchRelayPostgres(root: string, plain: Child, n: number, rounds: number, db: string): Promise<RelayFigures> {
  const hub = await childHub({ dataDir: join(root, 'relay-pg1'), db });
  try {
    return await run('1 replica, PostgreSQL', [hub], hub, hub, plain, n, rounds);
  } finally {
    await hub.stop();
  }
}

/** Two replicas sharing one identity (replica 2 gets a copy of replica 1's keys/ and kel.cbor). */
export async function benchRelayReplicas(
  root: string,
  plain: Child,
  n: number,
  rounds: number,
  db: string,
  bus: string,
): Promise<RelayFigures> {
  const config = '2 replicas, PostgreSQL + NATS';
  const one = join(root, 'relay-r1');
  const two = join(root, 'relay-r2');
  let r1: Child | null = null;
  let r2: Child | null = null;
  try {
    r1 = await childHub({ dataDir: one, db, bus });
    await mkdir(two, { recursive: true, mode: 0o700 });
    await cp(join(one, 'keys'), join(two, 'keys'), { recursive: true });
    await cp(join(one, 'kel.cbor'), join(two, 'kel.cbor'));
    r2 = await childHub({ dataDir: two, db, bus });
    return await run(config, [r1, r2], r1, r2, plain, n, rounds);
  } catch (err) {
    return { config, rounds: [], failed: (err as Error).message.split('\n').slice(0, 6).join(' | ') };
  } finally {
    await r1?.stop();
    await r2?.stop();
  }
}

export const relayMedians = (f: RelayFigures) => ({
  retries: median(f.rounds.map((r) => r.retries)),
  perSec: median(f.rounds.map((r) => r.perSec)),
  cpuUs: median(f.rounds.map((r) => r.cpuUs)),
  base: median(f.rounds.map((r) => r.base)),
  baseCpuUs: median(f.rounds.map((r) => r.baseCpuUs)),
});
