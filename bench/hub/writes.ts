// bench/hub, signed writes: registrations of new AIDs (POST /agents: KEL check, nonce claim, write) and
// the ledger's hold and capture (POST /ledger/hold with a payer's signed authorization, then
// POST /ledger/settle), one after another and 32 at once, against a hub in its own process. Each kind of
// run alternates with baseline POSTs at the same concurrency; the median of the rounds is shown.
import { join } from 'node:path';
import { loadIdentity, type Identity } from '../../src/identity/store.js';
import { signAuthorization } from '../../src/protocol/authorization.js';
import type { HoldAnswer } from '../../src/protocol/hub-api.js';
import { postRate } from './baseline.js';
import { type Child, childHub, keepAlive, median, memoryIdentity, nonce, pool, rate, register, signedJson } from './common.js';

export interface Rates {
  /** ops/s of the subject, and of the baseline POSTs alternated with it, per round. */
  rounds: { subject: number; base: number; cpuUs: number; baseCpuUs: number }[];
}

export const medianOf = (r: Rates, key: keyof Rates['rounds'][number]) => median(r.rounds.map((x) => x[key]));

/** `rounds` rounds of: baseline POSTs, then `run` (which answers ops/s over `ops` ops); hub CPU µs an op. */
async function alternate(
  rounds: number,
  hub: Child,
  plain: Child,
  ops: number,
  concurrency: number,
  run: () => Promise<number>,
): Promise<Rates> {
  const out: Rates = { rounds: [] };
  for (let r = 0; r < rounds; r++) {
    const base = await postRate(plain, ops, concurrency);
    const cpu0 = await hub.cpu();
    const subject = await run();
    const cpuUs = ((await hub.cpu()) - cpu0) / ops;
    out.rounds.push({ subject, base: base.perSec, cpuUs, baseCpuUs: base.cpuUs });
  }
  return out;
}

export interface RegistrationFigures {
  seq: Rates;
  par: Rates;
}

export async function benchRegistration(
  root: string,
  name: string,
  plain: Child,
  n: { seq: number; par: number; rounds: number },
  db?: string,
): Promise<RegistrationFigures> {
  const hub = await childHub({ dataDir: join(root, `reg-${name}`), ...(db ? { db } : {}) });
  const agent = keepAlive(32);
  try {
    // Warm-up: connections, code paths, the database's caches.
    const warm = Array.from({ length: 64 }, () => memoryIdentity());
    await pool(warm.length, 8, (i) => register(agent, hub.url, warm[i]!, `warm${i}`).then(() => {}));
    const batch = (k: number) => Array.from({ length: k }, () => memoryIdentity());
    const seq = await alternate(n.rounds, hub, plain, n.seq, 1, async () => {
      const ids = batch(n.seq);
      return rate(ids.length, 1, (i) => register(agent, hub.url, ids[i]!, `s${i}`).then(() => {}));
    });
    const par = await alternate(n.rounds, hub, plain, n.par, 32, async () => {
      const ids = batch(n.par);
      return rate(ids.length, 32, (i) => register(agent, hub.url, ids[i]!, `p${i}`).then(() => {}));
    });
    return { seq, par };
  } finally {
    agent.destroy();
    await hub.stop();
  }
}

/** Hold+capture pairs run before the ledger is measured, at 32 at once (4,000 ops). */
const LEDGER_WARM_PAIRS = 2000;

export interface LedgerFigures {
  seq: Rates;
  par: Rates;
  onePayer: Rates;
}

/**
 * Holds and captures of 1 credit. Many payers (two per worker) and one payee per worker, so the ops of
 * different workers touch different accounts; then all 32 workers paying from one payer (its account is
 * in every hold: the contention a busy payer meets). An op is one hold or one capture.
 */
export async function benchLedger(
  root: string,
  name: string,
  plain: Child,
  n: { seq: number; par: number; rounds: number },
  db?: string,
): Promise<LedgerFigures> {
  const dataDir = join(root, `ledger-${name}`);
  const hub = await childHub({ dataDir, ...(db ? { db } : {}) });
  const agent = keepAlive(32);
  try {
    const hubId = await loadIdentity(dataDir);
    const network = `hub:${hubId.aid}`;
    const payees = Array.from({ length: 32 }, () => memoryIdentity());
    const payers = Array.from({ length: 64 }, () => memoryIdentity());
    await pool(96, 16, (i) => register(agent, hub.url, i < 32 ? payees[i]! : payers[i - 32]!, `l${i}`).then(() => {}));
    await pool(64, 16, (i) =>
      signedJson(agent, hub.url, hubId, 'POST', '/ledger/mint', { aid: payers[i]!.aid, amount: '1000000000000', nonce: nonce() }).then(
        () => {},
      ),
    );
    const pair = async (payer: Identity, payee: Identity) => {
      const auth = signAuthorization(payer, {
        to: payee.aid,
        amount: '1',
        asset: 'credit',
        network,
        taskId: nonce(),
        quoteId: nonce(),
        nonce: nonce(),
        validBefore: Date.now() + 600_000,
      });
      const held = await signedJson<HoldAnswer>(agent, hub.url, payee, 'POST', '/ledger/hold', {
        authorization: Buffer.from(auth).toString('base64'),
      });
      await signedJson(agent, hub.url, payee, 'POST', '/ledger/settle', { hold: held.hold, action: 'capture', nonce: nonce() });
    };
    // Each worker pays from its own two payers to its own payee; `one`: every worker from payers[0].
    const run = (pairs: number, concurrency: number, one = false) =>
      rate(pairs, concurrency, (i, w) => pair(one ? payers[0]! : payers[w + 32 * (i % 2)]!, payees[w]!)).then((perSec) => perSec * 2);
    // Warm-up until the hub runs compiled code: a fresh process spends most of its first thousands of ops
    // compiling them (measured on 2 cores at 32 at once, PostgreSQL: hub 2.9 ms CPU an op after 128 ops,
    // 1.1 ms after 6,000; the bench's own client 1.1 -> 0.4 ms), which is not what a running hub costs.
    await run(LEDGER_WARM_PAIRS, 32);
    const seq = await alternate(n.rounds, hub, plain, n.seq * 2, 1, () => run(n.seq, 1));
    const par = await alternate(n.rounds, hub, plain, n.par * 2, 32, () => run(n.par, 32));
    const onePayer = await alternate(n.rounds, hub, plain, n.par * 2, 32, () => run(n.par, 32, true));
    return { seq, par, onePayer };
  } finally {
    agent.destroy();
    await hub.stop();
  }
}
