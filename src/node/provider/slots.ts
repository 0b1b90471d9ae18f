// Quotas, then concurrency (SPEC §4.1), after the stateless checks: a call's three quota windows
// (bucket actors: exact sliding windows, journaled as ADMIT and UNDO) and its capability's in-flight
// slot (the inflight actor: START, FINISH). Every slot taken before a refusal is given back, so a refused
// call consumes nothing, and a call refused by one window never holds a slot another caller's call is
// refused for (each capability's Gate orders the admissions, see gate.ts).
import type { OfferedCapability } from '../../config/check.js';
import type { ActorHost } from '../../runtime/host.js';
import { bucket, quotaIds, type Bucket, type BucketOutcome } from '../../actors/bucket.js';
import { inflight } from '../../actors/inflight.js';
import type { BucketInput } from '../../../machines/bucket.js';
import { precheck, refusal, type CallIn, type CheckParts, type Checked, type FileOut, type Refusal } from './checks.js';
import type { Gates } from './gate.js';

const MINUTE = 60_000;
const DAY = 24 * 3_600_000;

/** What taking slots uses of the node: its actor host, and the gates the node owns. */
export interface SlotParts {
  host: ActorHost;
  gates: Gates;
}

export type Admission =
  | { admitted: true; capability: OfferedCapability; files: FileOut[]; listed: boolean; release(undoQuota?: boolean): Promise<void> }
  | (Refusal & { listed?: boolean });

/** The whole admission of a free call with nothing else in its batch: the checks, then the slots. */
export async function admit(parts: CheckParts & SlotParts, call: CallIn): Promise<Admission> {
  const checked = await precheck(parts, call);
  return 'admitted' in checked ? checked : (await admitTogether(parts, checked, call, () => Promise.resolve(null)))[1];
}

/**
 * A free call's admission, shared (see Gate): its three windows' ADMIT and its in-flight START are sent
 * in one tick, with the events `together` sends (the call's RECEIVED), so they share a journal batch. A
 * refused one gives back what it took; refused while an admission queued before it gave something back,
 * it may have been refused for a slot nobody ends up using, so it asks again, exclusively. Every refusal
 * that stands was decided with no slot held by a refused call. Resolves with what `together` gave and
 * the admission.
 */
export async function admitTogether<T>(
  parts: SlotParts,
  checked: Checked,
  call: CallIn,
  together: () => Promise<T>,
): Promise<[T, Admission]> {
  const gate = parts.gates.of(checked.capability.id);
  const ticket = await gate.enter();
  try {
    ticket.sent = true;
    const before = gate.sentBefore(ticket);
    const asked = ask(parts.host, checked, call);
    const [extra, tried] = await Promise.all([together(), asked]);
    if (!tried.refusal) {
      ticket.decide(false);
      return [
        extra,
        { admitted: true, capability: checked.capability, files: checked.files, listed: checked.listed, release: tried.release },
      ];
    }
    const gaveBack = tried.giveBack();
    ticket.decide(tried.took);
    await gaveBack;
    const affected = (await Promise.all(before.map((t) => t.decided))).some(Boolean);
    if (!affected) return [extra, { ...tried.refusal, listed: checked.listed }];
    return [extra, await gate.exclusive(() => takeAll(parts.host, checked, call))];
  } finally {
    // Failed (a journal write): whatever it took may be gone or held; the others must not wait on it.
    ticket.decide(true);
  }
}

/**
 * A priced call's quota windows, taken alone in the capability's turn (its in-flight slot is taken once
 * it is paid, `takeInflight`). `release(true)` gives the windows back.
 */
export function takeQuota(parts: SlotParts, checked: Checked, call: CallIn): Promise<Admission> {
  return parts.gates.of(checked.capability.id).exclusive(async () => {
    const taken = await takeWindows(parts.host, checked.capability, call);
    if ('reason' in taken) return { ...taken, listed: checked.listed };
    return {
      admitted: true,
      capability: checked.capability,
      files: checked.files,
      listed: checked.listed,
      release: async (undoQuota = false) => void (undoQuota && (await taken.giveBack())),
    };
  });
}

/** The in-flight slot of a paid call (its quota was taken when it was quoted), in the capability's turn. */
export function takeInflight(parts: SlotParts, cap: OfferedCapability, call: CallIn): Promise<{ release(): Promise<void> } | Refusal> {
  return parts.gates.of(cap.id).exclusive(() => startInflight(parts.host, cap, call));
}

interface Asked {
  /** The first refusal in the table's order (windows, then the in-flight slot), or null when all were taken. */
  refusal: Refusal | null;
  /** Whether any window or the slot was taken. */
  took: boolean;
  /** Queues now (in this tick) the give-back of everything taken; resolves once written. */
  giveBack(): Promise<void>;
  /** The in-flight slot goes back (once), and with `undoQuota` the windows too (once). */
  release(undoQuota?: boolean): Promise<void>;
}

/** Sends the three windows' ADMIT and the in-flight START in this tick. */
async function ask(host: ActorHost, checked: Checked, call: CallIn): Promise<Asked> {
  const cap = checked.capability;
  const windows = quotaWindows(host, cap, call.from);
  const slot = inflight(host, cap.id);
  const [outcomes, start] = await Promise.all([admitAll(windows), slot.start(inflightLimits(cap), call.id, call.from)]);
  const { taken, refusal: windowRefusal } = readWindows(windows, outcomes);
  const full = start.started ? null : fullRefusal(start.full);
  const started = full === null;
  let undone = false;
  let finished = !started;
  const undo = () => {
    if (undone) return [];
    undone = true;
    return [undoAll(taken)];
  };
  const finish = () => {
    if (finished) return [];
    finished = true;
    return [slot.finish(call.id)];
  };
  return {
    refusal: windowRefusal ?? full,
    took: taken.length > 0 || started,
    giveBack: async () => void (await Promise.all([...undo(), ...finish()])),
    release: async (undoQuota = false) => void (await Promise.all([...(undoQuota ? undo() : []), ...finish()])),
  };
}

/** Windows, then the slot, one after the other (a call's turn alone, see Gate.exclusive). */
async function takeAll(host: ActorHost, checked: Checked, call: CallIn): Promise<Admission> {
  const { capability: cap, files, listed } = checked;
  const taken = await takeWindows(host, cap, call);
  if ('reason' in taken) return { ...taken, listed };
  const slot = await startInflight(host, cap, call);
  if ('admitted' in slot) {
    await taken.giveBack();
    return { ...slot, listed };
  }
  return {
    admitted: true,
    capability: cap,
    files,
    listed,
    release: async (undoQuota = false) => {
      if (undoQuota) await taken.giveBack();
      await slot.release();
    },
  };
}

/** All three windows in one journal batch; the first refusal in the table's order is the reason. */
async function takeWindows(host: ActorHost, cap: OfferedCapability, call: CallIn): Promise<{ giveBack(): Promise<unknown> } | Refusal> {
  const windows = quotaWindows(host, cap, call.from);
  const { taken, refusal } = readWindows(windows, await admitAll(windows));
  const giveBack = () => undoAll(taken);
  if (refusal) {
    await giveBack();
    return refusal;
  }
  return { giveBack };
}

/**
 * One machine counts both limits, so a START is checked against the whole count and the caller's at once
 * (two machines would let a call hold one slot for a moment while the other refuses it). Returns the
 * slot's release (once only), or the refusal when the capability or the caller is full.
 */
async function startInflight(host: ActorHost, cap: OfferedCapability, call: CallIn): Promise<{ release(): Promise<void> } | Refusal> {
  const slot = inflight(host, cap.id);
  const start = await slot.start(inflightLimits(cap), call.id, call.from);
  if (!start.started) return fullRefusal(start.full);
  let released = false;
  return {
    release: async () => {
      if (released) return;
      released = true;
      await slot.finish(call.id);
    },
  };
}

interface Window {
  bucket: Bucket;
  limits: BucketInput;
  reason: Refusal['reason'];
}

function quotaWindows(host: ActorHost, cap: OfferedCapability, caller: string): Window[] {
  const ids = quotaIds(cap.id, caller);
  const limits = cap.inbound;
  return [
    { bucket: bucket(host, ids.callerMin), limits: { limit: limits.per_caller_per_min, windowMs: MINUTE }, reason: 'quota_caller_per_min' },
    { bucket: bucket(host, ids.callerDay), limits: { limit: limits.per_caller_per_day, windowMs: DAY }, reason: 'quota_caller_per_day' },
    { bucket: bucket(host, ids.globalMin), limits: { limit: limits.global_per_min, windowMs: MINUTE }, reason: 'quota_global_per_min' },
  ];
}

export const inflightLimits = (cap: OfferedCapability) => ({ max: cap.inbound.max_inflight, perCaller: cap.inbound.per_caller_inflight });

/** One ADMIT per window, sent in this tick (so they share a journal batch). */
const admitAll = (windows: Window[]) => Promise.all(windows.map((w) => w.bucket.admit(w.limits)));

/** Gives back the slots the ADMITs took. */
const undoAll = (taken: [Bucket, number][]) => Promise.all(taken.map(([b, stamp]) => b.undo(stamp)));

/** The slots the ADMITs took (window, stamp), and the first refusal in the table's order. */
function readWindows(windows: Window[], outcomes: BucketOutcome[]): { taken: [Bucket, number][]; refusal: Refusal | null } {
  const taken: [Bucket, number][] = [];
  let first: Refusal | null = null;
  outcomes.forEach((o, i) => {
    const w = windows[i]!;
    if (o.admitted) taken.push([w.bucket, o.stamp]);
    else first ??= refusal(w.reason, { retryAfterMs: o.retryAfterMs });
  });
  return { taken, refusal: first };
}

/** Which in-flight limit was full, as the refusal the caller gets. */
const fullRefusal = (full: 'max' | 'caller'): Refusal => refusal(full === 'caller' ? 'caller_inflight' : 'max_inflight');
