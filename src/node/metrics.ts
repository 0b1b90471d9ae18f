// The node's Prometheus metrics (issue 22): one registry per node (tests run several nodes in one
// process, and prom-client's global registry would refuse a second metric of the same name). The code
// reports through the named functions here; nothing else imports prom-client. Labels are capability
// ids (the operator's own config; any other id a caller sends is counted as "unknown"), reason codes and
// outcomes (fixed lists): never an AID, a task id, an amount or a payload, so a scrape says how busy the
// node is and why it refused, never who called it or what was said.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { ActorHost } from '../runtime/host.js';
import type { CallMetrics } from './provider/record.js';

/** What the metrics read at scrape time (counters the parts keep anyway). */
export interface MetricSources {
  host(): ActorHost | null;
  relay(): { received: number; sent: number; refused: Record<string, number>; pending: number } | null;
}

/** Seconds: a call's whole run (a service may take minutes), and one journal batch (an fsync). */
const CALL_BUCKETS = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];
const JOURNAL_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];
const BATCH_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256];

export class NodeMetrics implements CallMetrics {
  readonly registry = new Registry();
  private readonly known: ReadonlySet<string>;
  private readonly admitted: Counter<'capability'>;
  private readonly refused: Counter<'capability' | 'reason'>;
  private readonly quota: Counter<'capability' | 'window'>;
  private readonly duration: Histogram<'capability'>;
  private readonly ended: Counter<'capability' | 'outcome'>;
  private readonly inflight: Gauge<'capability'>;
  private readonly cards: Counter<'outcome'>;
  private readonly journalSeconds: Histogram;
  private readonly journalEntries: Histogram;
  private processMetrics = false;

  constructor(capabilities: readonly string[], sources: MetricSources) {
    this.known = new Set(capabilities);
    const registers = [this.registry];
    this.admitted = new Counter({
      name: 'anet_calls_admitted_total',
      help: 'Inbound capability calls admitted (past checks, quotas and the in-flight limit)',
      labelNames: ['capability'],
      registers,
    });
    this.refused = new Counter({
      name: 'anet_calls_refused_total',
      help: 'Inbound capability calls refused, by reason code',
      labelNames: ['capability', 'reason'],
      registers,
    });
    this.quota = new Counter({
      name: 'anet_quota_refusals_total',
      help: 'Calls refused by a quota window (caller_per_min, caller_per_day, global_per_min)',
      labelNames: ['capability', 'window'],
      registers,
    });
    this.duration = new Histogram({
      name: 'anet_call_duration_seconds',
      help: 'Admitted calls, from admission to their end',
      labelNames: ['capability'],
      buckets: CALL_BUCKETS,
      registers,
    });
    this.ended = new Counter({
      name: 'anet_calls_ended_total',
      help: 'Admitted calls ended, by outcome: completed, a failure reason code, canceled, or stopped (the node stopped under it)',
      labelNames: ['capability', 'outcome'],
      registers,
    });
    this.inflight = new Gauge({ name: 'anet_calls_in_flight', help: 'Calls running now', labelNames: ['capability'], registers });
    this.cards = new Counter({
      name: 'anet_card_fetches_total',
      help: 'Cards read (`anet card`), by outcome: ok, or the reason code',
      labelNames: ['outcome'],
      registers,
    });
    this.journalSeconds = new Histogram({
      name: 'anet_journal_append_seconds',
      help: 'Time to write one journal batch (with its fsync)',
      buckets: JOURNAL_BUCKETS,
      registers,
    });
    this.journalEntries = new Histogram({
      name: 'anet_journal_batch_entries',
      help: 'Journal entries per batch written',
      buckets: BATCH_BUCKETS,
      registers,
    });
    this.watch(sources);
    // Every capability shows from the first scrape, at 0, so a rate() has a start.
    for (const capability of capabilities) {
      this.admitted.inc({ capability }, 0);
      this.inflight.set({ capability }, 0);
    }
  }

  /** Only the operator's capability ids become labels: a caller's made-up id is "unknown". */
  private label(capability: string): string {
    return this.known.has(capability) ? capability : 'unknown';
  }

  /** A call admitted: counted and in flight until the function returned is called (once) with how it ended. */
  callAdmitted(capability: string): (outcome: string) => void {
    const labels = { capability: this.label(capability) };
    this.admitted.inc(labels);
    this.inflight.inc(labels);
    const end = this.duration.startTimer(labels);
    let ended = false;
    return (outcome) => {
      if (ended) return;
      ended = true;
      end();
      this.inflight.dec(labels);
      this.ended.inc({ ...labels, outcome });
    };
  }

  callRefused(capability: string, reason: string): void {
    const label = this.label(capability);
    this.refused.inc({ capability: label, reason });
    if (reason.startsWith('quota_')) this.quota.inc({ capability: label, window: reason.slice('quota_'.length) });
  }

  cardFetched(outcome: string): void {
    this.cards.inc({ outcome });
  }

  journalWritten(seconds: number, entries: number): void {
    this.journalSeconds.observe(seconds);
    this.journalEntries.observe(entries);
  }

  /** Node's process metrics (CPU, memory, event-loop lag, GC): for a daemon, not for a one-shot command. */
  withProcessMetrics(): this {
    if (!this.processMetrics) collectDefaultMetrics({ register: this.registry });
    this.processMetrics = true;
    return this;
  }

  /** The text a scrape gets, and its content type. */
  async scrape(): Promise<{ type: string; text: string }> {
    return { type: this.registry.contentType, text: await this.registry.metrics() };
  }

  /** Gauges and counters read from the parts when scraped: nothing is paid per message or event. */
  private watch(sources: MetricSources): void {
    const registers = [this.registry];
    new Gauge({
      name: 'anet_actors_live',
      help: 'Actors held in memory',
      registers,
      collect() {
        this.set(sources.host()?.liveCount() ?? 0);
      },
    });
    new Counter({
      name: 'anet_actors_passivated_total',
      help: 'Actors written out of memory to LevelDB (least recently used beyond the limit)',
      registers,
      collect() {
        this.reset();
        this.inc(sources.host()?.stats.passivated ?? 0);
      },
    });
    new Counter({
      name: 'anet_relay_messages_total',
      help: 'Peer messages through the relay: in (opened and handled) and out (taken by the hub)',
      labelNames: ['direction'],
      registers,
      collect() {
        const r = sources.relay();
        this.reset();
        this.inc({ direction: 'in' }, r?.received ?? 0);
        this.inc({ direction: 'out' }, r?.sent ?? 0);
      },
    });
    new Counter({
      name: 'anet_relay_refused_total',
      help: 'Envelopes refused on arrival, by code (replayed, expired, bad signature, backlog full, …)',
      labelNames: ['code'],
      registers,
      collect() {
        this.reset();
        for (const [code, n] of Object.entries(sources.relay()?.refused ?? {})) this.inc({ code }, n);
      },
    });
    new Gauge({
      name: 'anet_relay_queue_depth',
      help: 'Messages taken from the relay and not yet handled',
      registers,
      collect() {
        this.set(sources.relay()?.pending ?? 0);
      },
    });
  }
}
