// The hub's Prometheus metrics (issue 22), served at `GET /metrics`: one registry per hub (tests run
// several hubs in one process). Route handlers report through the named functions here; nothing else
// imports prom-client. Labels are outcomes and error codes (fixed lists) and ledger operation kinds:
// never an AID, an amount, an envelope id or anything from a body, so the scrape tells how busy the hub is
// and never who talked to whom (the same rule as its logs, src/hub/main.ts).
import type { ServerResponse } from 'node:http';
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { Relay } from './relay.js';
import type { LedgerStore, MailboxStore } from './storage/types.js';

/** The ledger operations, as labels: anything else a request names is "other". */
const LEDGER_KINDS = new Set(['mint', 'hold', 'capture', 'release', 'settle', 'account']);

export class HubMetrics {
  readonly registry = new Registry();
  private readonly cards: Counter<'outcome'>;
  private readonly ledger: Counter<'kind' | 'outcome'>;

  constructor(relay: Relay, mailbox: MailboxStore, ledger: LedgerStore) {
    const registers = [this.registry];
    this.cards = new Counter({
      name: 'anet_hub_card_fetches_total',
      help: 'GET /agents/<aid>/card, by outcome: ok, unknown_aid, withdrawn',
      labelNames: ['outcome'],
      registers,
    });
    this.ledger = new Counter({
      name: 'anet_hub_ledger_operations_total',
      help: 'Ledger requests by kind (mint, hold, capture, release, account) and outcome (ok or the error code)',
      labelNames: ['kind', 'outcome'],
      registers,
    });
    watchRelay(registers, relay, mailbox);
    if (ledger.counts) watchLedger(registers, ledger.counts);
  }

  cardFetched(outcome: 'ok' | 'unknown_aid' | 'withdrawn'): void {
    this.cards.inc({ outcome });
  }

  ledgerOp(kind: string, outcome: string): void {
    this.ledger.inc({ kind: LEDGER_KINDS.has(kind) ? kind : 'other', outcome });
  }

  /** Node's process metrics (CPU, memory, event-loop lag, GC): for a serving hub. */
  withProcessMetrics(): this {
    collectDefaultMetrics({ register: this.registry });
    return this;
  }

  /** Answers `GET /metrics`. */
  async answer(res: ServerResponse): Promise<void> {
    const text = await this.registry.metrics();
    res.writeHead(200, { 'content-type': this.registry.contentType, 'cache-control': 'no-store' });
    res.end(text);
  }
}

/** The relay's own counters and the mailbox's size, read when scraped: nothing is paid per envelope. */
function watchRelay(registers: Registry[], relay: Relay, mailbox: MailboxStore): void {
  new Counter({
    name: 'anet_hub_relay_messages_total',
    help: 'Envelopes in (offered by a sender or a replica) and out (pushed on a recipient stream)',
    labelNames: ['direction'],
    registers,
    collect() {
      this.reset();
      this.inc({ direction: 'in' }, relay.stats.accepted);
      this.inc({ direction: 'out' }, relay.stats.delivered);
    },
  });
  new Counter({
    name: 'anet_hub_relay_envelopes_total',
    help: 'What became of envelopes: queued (kept for an offline recipient), dropped (a bound), expired, acked',
    labelNames: ['event'],
    registers,
    collect() {
      this.reset();
      for (const event of ['queued', 'dropped', 'expired', 'acked'] as const) this.inc({ event }, relay.stats[event]);
    },
  });
  new Gauge({
    name: 'anet_hub_relay_streams',
    help: 'Recipient streams open on this process',
    registers,
    collect() {
      this.set(relay.openStreams);
    },
  });
  new Gauge({
    name: 'anet_hub_mailbox_envelopes',
    help: 'Envelopes kept in the mailboxes (the relay queue depth), all recipients together',
    registers,
    async collect() {
      this.set((await mailbox.size()).envelopes);
    },
  });
  new Gauge({
    name: 'anet_hub_mailbox_bytes',
    help: 'Bytes kept in the mailboxes, all recipients together',
    registers,
    async collect() {
      this.set((await mailbox.size()).bytes);
    },
  });
}

/** How the ledger's transactions ran (PostgreSQL): many fallbacks mean batches the database keeps failing. */
function watchLedger(registers: Registry[], counts: NonNullable<LedgerStore['counts']>): void {
  new Counter({
    name: 'anet_hub_ledger_transactions_total',
    help: 'Ledger transactions: single (one op), batch (several ops waiting together), fallback (a batch the database failed, its ops then run one by one)',
    labelNames: ['kind'],
    registers,
    collect() {
      this.reset();
      this.inc({ kind: 'single' }, counts.single);
      this.inc({ kind: 'batch' }, counts.batches);
      this.inc({ kind: 'fallback' }, counts.fallbacks);
    },
  });
  new Counter({
    name: 'anet_hub_ledger_batched_ops_total',
    help: 'Ledger ops that ran in batches (divide by anet_hub_ledger_transactions_total{kind="batch"} for the mean batch)',
    registers,
    collect() {
      this.reset();
      this.inc(counts.batchedOps);
    },
  });
}
