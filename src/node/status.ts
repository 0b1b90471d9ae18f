// `anet status` (issue 22): what the operator of a long-lived node asks first — how long it has run, whether
// its hub stream is open, which card it publishes, how full each capability's quota windows and in-flight
// counts are, where its tasks stand, how big its journal is and when it last checkpointed. Read from the
// actors' states (live or snapshotted), so windows are shown as the journal carried them over a restart.
import type { Node } from './node.js';
import type { OwnCard } from '../card/publish.js';
import type { TaskState } from './caller/records.js';
import { offeredCapabilities, type OfferedCapability } from '../config/check.js';
import { quotaIds } from '../actors/bucket.js';
import { inflight } from '../actors/inflight.js';
import { stampsOf, type BucketContext } from '../../machines/bucket.js';
import type { ActorHost } from '../runtime/host.js';
import type { JournalEntry, Store } from '../../store/db.js';
import { seqKey } from '../../store/db.js';
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';

/** A window's use at the time of the status: calls counted in it, and its limit. */
export interface WindowUse {
  used: number;
  limit: number;
}

export interface CapabilityStatus {
  id: string;
  inflight: { running: number; max: number; perCaller: number };
  /** The window every caller shares, per minute. */
  globalPerMin: WindowUse;
  /** The callers with calls in their windows now, busiest first (at most MAX_CALLERS). */
  callers: { caller: string; perMin: WindowUse; perDay: WindowUse }[];
}

export interface NodeStatus {
  aid: string;
  hub: string;
  /** The process answering and since when it runs: the daemon's when one runs. */
  pid: number;
  startedAt: number;
  uptimeMs: number;
  card: OwnCard | null;
  relay: ReturnType<Node['relayStatus']>;
  capabilities: CapabilityStatus[];
  /** Tasks this node sent, by state; calls it runs now, and text tasks waiting in its inbox. */
  tasks: { sent: Partial<Record<TaskState, number>>; running: number; inbox: number };
  journal: { events: number; lastCheckpoint: number; bytes: number };
}

/** Callers listed per capability at most: the busiest. */
export const MAX_CALLERS = 10;

export async function nodeStatus(node: Node): Promise<NodeStatus> {
  const now = node.now();
  const host = await node.actors();
  const callers = await quotaCallers(node.store);
  const [card, capabilities, tasks, journal] = await Promise.all([
    node.store.meta.get('card') as Promise<OwnCard | undefined>,
    Promise.all(offeredCapabilities(node.config).map((cap) => capabilityStatus(host, cap, callers.get(cap.id) ?? [], now))),
    taskCounts(node),
    journalStatus(node),
  ]);
  return {
    aid: node.identity.aid,
    hub: node.config.hub,
    pid: process.pid,
    // The process's own start: the daemon opens its node as it starts.
    startedAt: Math.round(Date.now() - process.uptime() * 1000),
    uptimeMs: Math.round(process.uptime() * 1000),
    card: card ?? null,
    relay: node.relayStatus(),
    capabilities,
    tasks,
    journal,
  };
}

async function capabilityStatus(host: ActorHost, cap: OfferedCapability, who: string[], now: number): Promise<CapabilityStatus> {
  const ids = quotaIds(cap.id, '*');
  const running = Object.keys(await inflight(host, cap.id).running()).length;
  const perMin = (ctx: BucketContext | undefined, limit: number, windowMs: number) => use(ctx, now, limit, windowMs);
  const callers = await Promise.all(
    who.map(async (caller) => {
      const q = quotaIds(cap.id, caller);
      return {
        caller,
        perMin: perMin(await context(host, q.callerMin), cap.inbound.per_caller_per_min, 60_000),
        perDay: use(await context(host, q.callerDay), now, cap.inbound.per_caller_per_day, 86_400_000),
      };
    }),
  );
  return {
    id: cap.id,
    inflight: { running, max: cap.inbound.max_inflight, perCaller: cap.inbound.per_caller_inflight },
    globalPerMin: perMin(await context(host, ids.globalMin), cap.inbound.global_per_min, 60_000),
    callers: callers
      .filter((c) => c.perMin.used + c.perDay.used > 0)
      .sort((a, b) => b.perDay.used - a.perDay.used || b.perMin.used - a.perMin.used)
      .slice(0, MAX_CALLERS),
  };
}

const context = async (host: ActorHost, id: string) => (await host.state(id))?.context as BucketContext | undefined;

/** The calls a window holds at `now` (none before its first call), against the limit it is configured with. */
function use(ctx: BucketContext | undefined, now: number, limit: number, windowMs: number): WindowUse {
  const from = now - (ctx?.windowMs ?? windowMs);
  return { used: ctx ? stampsOf(ctx).filter((at) => at > from).length : 0, limit };
}

const DAY_WINDOW = /^quota\/(.+)\/([^/]+)\/day$/;

/**
 * The callers with a per-day window, by capability (the day window outlives the minute one): the actors
 * snapshotted, and those whose first event came after the last checkpoint (only in the journal so far).
 */
async function quotaCallers(store: Store): Promise<Map<string, string[]>> {
  const ids = new Set<string>();
  for await (const id of store.snapshots.keys({ gte: 'quota/', lt: 'quota0' })) ids.add(id);
  const checkpoint = ((await store.meta.get('checkpoint')) as number | undefined) ?? 0;
  for await (const entry of store.journal.values({ gt: seqKey(checkpoint) })) {
    const actor = (entry as JournalEntry).actor;
    if (actor.startsWith('quota/')) ids.add(actor);
  }
  const byCapability = new Map<string, string[]>();
  for (const id of ids) {
    const m = DAY_WINDOW.exec(id);
    if (!m || m[2] === 'global') continue;
    byCapability.set(m[1]!, [...(byCapability.get(m[1]!) ?? []), m[2]!]);
  }
  return byCapability;
}

async function taskCounts(node: Node): Promise<NodeStatus['tasks']> {
  const sent: Partial<Record<TaskState, number>> = {};
  for (const r of await node.caller.tasks()) sent[r.state] = (sent[r.state] ?? 0) + 1;
  const count = async (sub: typeof node.store.running) => {
    let n = 0;
    for await (const _ of sub.keys()) n++;
    return n;
  };
  return { sent, running: await count(node.store.running), inbox: await count(node.store.inbox) };
}

async function journalStatus(node: Node): Promise<NodeStatus['journal']> {
  const [last] = await node.store.journal.keys({ reverse: true, limit: 1 }).all();
  return {
    events: last === undefined ? 0 : Number(last),
    lastCheckpoint: ((await node.store.meta.get('checkpoint')) as number | undefined) ?? 0,
    bytes: await dirSize(node.store.dir),
  };
}

/** The bytes of the files in a directory (LevelDB keeps its files flat). */
async function dirSize(dir: string): Promise<number> {
  let total = 0;
  for (const name of await readdir(dir)) total += (await stat(join(dir, name)).catch(() => ({ size: 0 }))).size;
  return total;
}
