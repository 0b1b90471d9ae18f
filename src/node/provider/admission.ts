// Inbound decisions for a capability call (SPEC §4, §4.1), in the spec's order, first refusal wins:
// deny list; unknown, hidden or allow_only-for-a-stranger ids (one reply for all of them); then the
// argument, file, quota and concurrency checks. Quotas are the bucket machines (exact sliding windows,
// journaled); a call refused by a later check gives back the slots an earlier one took, so a refused
// call consumes nothing. Concurrency is the in-flight machines, released when the call ends.
import { fileTypeFromBuffer } from 'file-type';
import type { Config } from '../../config/schema.js';
import { offeredCapabilities, type OfferedCapability } from '../../config/check.js';
import type { ActorHost } from '../../runtime/host.js';
import type { BucketContext } from '../../../machines/bucket.js';
import type { InflightContext } from '../../../machines/inflight.js';
import { standing } from '../../contacts/lists.js';

const MINUTE = 60_000;
const DAY = 24 * 3_600_000;

export interface FileIn {
  name: string;
  /** What the caller claims; ignored (the node detects the type itself). */
  mime?: string;
  data_b64: string;
}

export interface CallIn {
  id: string;
  from: string;
  capability: string;
  args: unknown;
  /** Bytes of the argument document as received (UTF-8 JSON); measured from `args` when absent. */
  argsBytes?: number;
  files?: FileIn[];
}

export interface FileOut {
  name: string;
  mime: string;
  data_b64: string;
}

export type Refusal = {
  admitted: false;
  reason:
    | 'not_accepting'
    | 'capability_not_public'
    | 'args_too_large'
    | 'bad_args'
    | 'files_not_accepted'
    | 'quota_caller_per_min'
    | 'quota_caller_per_day'
    | 'quota_global_per_min'
    | 'max_inflight'
    | 'caller_inflight'
    | 'payment_required';
  retryAfterMs?: number;
  detail?: string;
};

export type Admission =
  | { admitted: true; capability: OfferedCapability; files: FileOut[]; listed: boolean; release(undoQuota?: boolean): Promise<void> }
  | (Refusal & { listed?: boolean });

export interface AdmissionParts {
  dataDir: string;
  config: Config;
  host: ActorHost;
}

const refuse = (reason: Refusal['reason'], extra: Omit<Refusal, 'admitted' | 'reason'> = {}): Refusal => ({ admitted: false, reason, ...extra });

/** Where quotas and in-flight counts of one capability live, by actor id. */
export const actors = (cap: string, caller: string) => ({
  callerMin: `quota/${cap}/${caller}/min`,
  callerDay: `quota/${cap}/${caller}/day`,
  globalMin: `quota/${cap}/global/min`,
  inflight: `inflight/${cap}`,
});

export interface Checked {
  capability: OfferedCapability;
  files: FileOut[];
  listed: boolean;
}

/** Every check that reads no quota or slot: lists, the id, the arguments, the files. */
export async function precheck(parts: AdmissionParts, call: CallIn): Promise<Checked | (Refusal & { listed?: boolean })> {
  const who = await standing(parts.dataDir, parts.config, call.from);
  if (who === 'denied') return refuse('not_accepting');
  const cap = offeredCapabilities(parts.config).find((c) => c.id === call.capability);
  const listed = who === 'allowed' || who === 'trusted';
  // Unknown, not offered, or allow_only for an unlisted caller: one and the same reply.
  if (!cap || (cap.inbound.allow_only && !listed)) return refuse(parts.config.inbound.policy === 'open' ? 'capability_not_public' : 'not_accepting');
  const argsRefusal = checkArgs(cap, call.args, call.argsBytes);
  if (argsRefusal) return { ...argsRefusal, listed };
  const files = await checkFiles(cap, call.files ?? []);
  if ('admitted' in files) return { ...files, listed };
  return { capability: cap, files, listed };
}

export async function admit(parts: AdmissionParts, call: CallIn): Promise<Admission> {
  const checked = await precheck(parts, call);
  return 'admitted' in checked ? checked : takeSlots(parts, checked, call);
}

function checkArgs(cap: OfferedCapability, args: unknown, bytes?: number): Refusal | null {
  const size = bytes ?? Buffer.byteLength(JSON.stringify(args) ?? '', 'utf8');
  if (size > cap.inbound.max_args_bytes) return refuse('args_too_large', { detail: `${size} bytes; at most ${cap.inbound.max_args_bytes}` });
  if (!args || typeof args !== 'object' || Array.isArray(args)) return refuse('bad_args', { detail: 'the arguments must be a JSON object' });
  const dollar = Object.keys(args).find((k) => k.startsWith('$'));
  if (dollar !== undefined) return refuse('bad_args', { detail: `top-level key "${dollar}" begins with $` });
  return null;
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/**
 * Standard padded base64 in its one canonical form (RFC 4648 §4, §3.5: the bits the padding leaves over
 * are zero), so the service gets exactly the text an encoder writes for those bytes: `YR==` decodes
 * to "a" in lenient decoders and fails in strict ones. Not one regex of 4-character groups: V8
 * backtracks through every group and its stack overflows past ~4.5 MB of text, so a file of the default
 * 8 MiB made the handler throw.
 */
function isStrictBase64(text: string): boolean {
  if (text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) return false;
  const pad = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  if (pad === 0) return true;
  const last = B64.indexOf(text[text.length - pad - 1]!);
  return last % (pad === 2 ? 16 : 4) === 0;
}

/** The longest file name passed on, in UTF-8 bytes (most file systems' limit). */
export const MAX_FILE_NAME_BYTES = 255;

/**
 * The name a file reaches the service with (SPEC §3): the caller's name cut to its last path part (after
 * the last `/` or `\`), without control or format characters (NUL, newlines, bidi overrides), leading
 * dots or surrounding spaces, at most 255 bytes of UTF-8 (cut before the extension, never inside a
 * character); `file-<n>` (n from 1) when nothing is left. A service may use it as a file name as it is.
 */
export function safeFileName(name: unknown, index: number): string {
  const base = (typeof name === 'string' ? name : '').split(/[/\\]/).pop()!;
  let safe = base.replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu, '').trim().replace(/^[.\s]+/, '');
  if (Buffer.byteLength(safe) > MAX_FILE_NAME_BYTES) {
    const dot = safe.lastIndexOf('.');
    const ext = dot > 0 && safe.length - dot <= 16 ? safe.slice(dot) : '';
    // At most 255 characters can fit: the rest is never looked at (a name may be megabytes long).
    const stem = [...safe.slice(0, Math.min(safe.length - ext.length, 2 * MAX_FILE_NAME_BYTES))];
    while (Buffer.byteLength(stem.join('') + ext) > MAX_FILE_NAME_BYTES) stem.pop();
    safe = (stem.join('') + ext).trim();
  }
  return safe || `file-${index + 1}`;
}

function accepts(ranges: string[], mime: string): boolean {
  return ranges.some((r) => r === '*/*' || r === mime || (r.endsWith('/*') && mime.startsWith(r.slice(0, -1))));
}

async function checkFiles(cap: OfferedCapability, files: FileIn[]): Promise<FileOut[] | Refusal> {
  const rule = cap.inbound.files;
  const no = (detail: string) => refuse('files_not_accepted', { detail });
  if (files.length === 0) return [];
  if (!rule) return no('this capability takes no files');
  if (files.length > rule.max_count) return no(`${files.length} files; at most ${rule.max_count}`);
  const out: FileOut[] = [];
  for (const [i, f] of files.entries()) {
    const name = safeFileName(f?.name, i);
    const label = `file ${i + 1} (${[...name].slice(0, 64).join('')})`;
    if (typeof f?.data_b64 !== 'string' || !isStrictBase64(f.data_b64)) return no(`${label}: not standard padded base64`);
    const bytes = Buffer.from(f.data_b64, 'base64');
    if (bytes.length > rule.max_bytes) return no(`${label}: ${bytes.length} bytes; at most ${rule.max_bytes}`);
    // The type is the node's own reading of the bytes; the caller's claim is ignored (SPEC §3).
    const mime = (await fileTypeFromBuffer(bytes))?.mime ?? 'application/octet-stream';
    if (!accepts(rule.media_types, mime)) return no(`${label}: detected ${mime}, not one of ${rule.media_types.join(', ')}`);
    out.push({ name, mime, data_b64: f.data_b64 });
  }
  return out;
}

/**
 * Who may admit calls of one capability now. A call refused by one window must not hold another slot
 * (a shared window, the in-flight count) that a concurrent call of another caller needs. Admissions take
 * their turn in one of two ways:
 * - exclusive: alone, after every admission under way has decided — what paid calls do, and what a free
 *   call falls back to (below);
 * - shared (free calls): all its events (three windows and the in-flight START) go to the journal at once,
 *   beside other shared admissions, so admissions do not wait for each other's journal writes. A refused
 *   one gives back what it took. A call refused while an admission queued before it gave something back
 *   may have been refused for a slot nobody ends up using: it gives back its own and asks again,
 *   exclusively. So every refusal that stands was decided with no slot held by a refused call.
 */
interface Ticket {
  /** Its events are queued (only such a ticket's holds can be seen by later admissions). */
  sent: boolean;
  /** Resolves once it has queued its give-back (true) or kept everything it took (false). */
  decided: Promise<boolean>;
  decide(gaveBack: boolean): void;
}

class Gate {
  /** Shared admissions that have not decided yet. */
  readonly open = new Set<Ticket>();
  private exclusives = 0;
  private tail: Promise<void> = Promise.resolve();
  private waiting: (() => void)[] = [];

  /** A shared admission's ticket, once no exclusive admission waits or runs. */
  async enter(): Promise<Ticket> {
    while (this.exclusives > 0) await new Promise<void>((resolve) => this.waiting.push(resolve));
    let decide!: (gaveBack: boolean) => void;
    const ticket: Ticket = { sent: false, decided: new Promise<boolean>((resolve) => (decide = resolve)), decide: () => {} };
    ticket.decide = (gaveBack) => {
      if (!this.open.delete(ticket)) return;
      decide(gaveBack);
    };
    this.open.add(ticket);
    return ticket;
  }

  /** Runs `fn` alone: after earlier exclusive ones and once every shared admission under way decided. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    this.exclusives++;
    const run = this.tail.then(async () => {
      while (this.open.size > 0) await Promise.all([...this.open].map((t) => t.decided));
      return fn();
    });
    this.tail = run.then(
      () => this.left(),
      () => this.left(),
    );
    return run;
  }

  private left(): void {
    if (--this.exclusives > 0) return;
    const waiting = this.waiting;
    this.waiting = [];
    for (const resolve of waiting) resolve();
  }
}

/** The gates of each capability (per host). */
const gates = new WeakMap<ActorHost, Map<string, Gate>>();

function gateOf(host: ActorHost, capability: string): Gate {
  let byCap = gates.get(host);
  if (!byCap) gates.set(host, (byCap = new Map()));
  let gate = byCap.get(capability);
  if (!gate) byCap.set(capability, (gate = new Gate()));
  return gate;
}

/**
 * Quotas, then concurrency; every slot taken before a refusal is given back, and a call refused by one
 * window never holds a slot another caller's call is refused for (see Gate). Paid calls' quotas
 * (`inflight: false`) are taken exclusively, one at a time.
 */
export async function takeSlots(parts: AdmissionParts, checked: Checked, call: CallIn, opts: SlotOptions = {}): Promise<Admission> {
  if (opts.inflight === false) return gateOf(parts.host, checked.capability.id).exclusive(() => takeSlotsNow(parts, checked, call, opts));
  return (await admitWith(parts, checked, call, () => Promise.resolve(null)))[1];
}

/**
 * A free call's admission, shared (see Gate): its three windows and its in-flight slot are asked for in
 * one tick, with the events `together` sends (the call's RECEIVED), so they share a journal batch.
 * Resolves with what `together` gave and the admission.
 */
export async function admitWith<T>(parts: AdmissionParts, checked: Checked, call: CallIn, together: () => Promise<T>): Promise<[T, Admission]> {
  const gate = gateOf(parts.host, checked.capability.id);
  const ticket = await gate.enter();
  try {
    ticket.sent = true;
    const before = [...gate.open].filter((t) => t !== ticket && t.sent);
    const asked = ask(parts, checked, call);
    const [extra, tried] = await Promise.all([together(), asked]);
    if (!tried.refusal) {
      ticket.decide(false);
      return [extra, { admitted: true, capability: checked.capability, files: checked.files, listed: checked.listed, release: tried.release }];
    }
    const gaveBack = tried.giveBack();
    ticket.decide(tried.took);
    await gaveBack;
    const affected = (await Promise.all(before.map((t) => t.decided))).some(Boolean);
    if (!affected) return [extra, { ...tried.refusal, listed: checked.listed }];
    return [extra, await gate.exclusive(() => takeSlotsNow(parts, checked, call, {}))];
  } finally {
    // Failed (a journal write): whatever it took may be gone or held; the others must not wait on it.
    ticket.decide(true);
  }
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
async function ask(parts: AdmissionParts, checked: Checked, call: CallIn): Promise<Asked> {
  const { host } = parts;
  const cap = checked.capability;
  const limits = cap.inbound;
  const ids = actors(cap.id, call.from);
  const windows = quotaWindows(ids, limits);
  const [results, startSnap] = await Promise.all([sendAdmits(host, windows), sendStart(parts, cap, call)]);
  const { taken, refusal: windowRefusal } = readWindows(windows, results);
  const full = startRefusal(startSnap.context as InflightContext);
  const refusal = windowRefusal ?? full;
  const started = full === null;
  let undone = false;
  let finished = !started;
  const undo = () => {
    if (undone) return [];
    undone = true;
    return [sendUndos(host, taken)];
  };
  const finish = () => {
    if (finished) return [];
    finished = true;
    return [sendFinish(parts, cap, call)];
  };
  return {
    refusal,
    took: taken.length > 0 || started,
    giveBack: async () => void (await Promise.all([...undo(), ...finish()])),
    release: async (undoQuota = false) => void (await Promise.all([...(undoQuota ? undo() : []), ...finish()])),
  };
}

type Window = [string, { limit: number; windowMs: number }, Refusal['reason']];

/** One ADMIT per window, sent in this tick (so they share a journal batch). */
const sendAdmits = (host: ActorHost, windows: Window[]) => Promise.all(windows.map(([actor, input]) => host.send(actor, 'bucket', input, { type: 'ADMIT' })));

/** Gives back the slots the ADMITs took. */
const sendUndos = (host: ActorHost, taken: [string, number][]) => Promise.all(taken.map(([actor, stamp]) => host.send(actor, 'bucket', undefined, { type: 'UNDO', stamp })));

/** The slots the ADMITs took (actor, stamp), and the first refusal in the table's order. */
function readWindows(windows: Window[], results: { context: unknown }[]): { taken: [string, number][]; refusal: Refusal | null } {
  const taken: [string, number][] = [];
  let refusal: Refusal | null = null;
  results.forEach((snap, i) => {
    const ctx = snap.context as BucketContext;
    const [actor, , reason] = windows[i]!;
    if (ctx.last?.admitted) taken.push([actor, ctx.last.stamp]);
    else refusal ??= refuse(reason, { retryAfterMs: (ctx.last as { retryAfterMs: number }).retryAfterMs });
  });
  return { taken, refusal };
}

function quotaWindows(ids: ReturnType<typeof actors>, limits: OfferedCapability['inbound']): Window[] {
  return [
    [ids.callerMin, { limit: limits.per_caller_per_min, windowMs: MINUTE }, 'quota_caller_per_min'],
    [ids.callerDay, { limit: limits.per_caller_per_day, windowMs: DAY }, 'quota_caller_per_day'],
    [ids.globalMin, { limit: limits.global_per_min, windowMs: MINUTE }, 'quota_global_per_min'],
  ];
}

export interface SlotOptions {
  /** Take the quota windows only (a priced call's quote); `takeInflight` takes the slot once it is paid. */
  inflight?: boolean;
}

async function takeSlotsNow(parts: AdmissionParts, checked: Checked, call: CallIn, opts: SlotOptions): Promise<Admission> {
  const { capability: cap, files, listed } = checked;
  const { host } = parts;
  const ids = actors(cap.id, call.from);
  const limits = cap.inbound;
  const windows = quotaWindows(ids, limits);
  // All three windows in one journal batch; the first refusal in the table's order is the reason.
  const results = await sendAdmits(host, windows);
  const { taken, refusal } = readWindows(windows, results);
  const giveBack = () => sendUndos(host, taken);
  if (refusal) {
    await giveBack();
    return { ...refusal, listed };
  }
  if (opts.inflight === false) return { admitted: true, capability: cap, files, listed, release: async (undoQuota = false) => void (undoQuota && (await giveBack())) };
  const slot = await startInflight(parts, cap, call);
  if ('admitted' in slot) {
    await giveBack();
    return { ...slot, listed };
  }
  return { admitted: true, capability: cap, files, listed, release: async (undoQuota = false) => {
    if (undoQuota) await giveBack();
    await slot.release();
  } };
}

/**
 * One machine counts both limits, so a START is checked against the whole count and the caller's at once
 * (two machines would let a call hold one slot for a moment while the other refuses it). Returns the
 * slot's release (once only), or the refusal when the capability or the caller is full.
 */
async function startInflight(parts: AdmissionParts, cap: OfferedCapability, call: CallIn): Promise<{ release(): Promise<void> } | Refusal> {
  const full = startRefusal((await sendStart(parts, cap, call)).context as InflightContext);
  if (full) return full;
  let released = false;
  return {
    release: async () => {
      if (released) return;
      released = true;
      await sendFinish(parts, cap, call);
    },
  };
}

const sendStart = (parts: AdmissionParts, cap: OfferedCapability, call: CallIn) =>
  parts.host.send(actors(cap.id, call.from).inflight, 'inflight', { max: cap.inbound.max_inflight, perCaller: cap.inbound.per_caller_inflight }, { type: 'START', id: call.id, caller: call.from });

const sendFinish = (parts: AdmissionParts, cap: OfferedCapability, call: CallIn) =>
  parts.host.send(actors(cap.id, call.from).inflight, 'inflight', undefined, { type: 'FINISH', id: call.id });

/** Null when the START took a slot; else which limit was full. */
const startRefusal = (slot: InflightContext): Refusal | null => (slot.last?.started ? null : refuse(slot.last?.full === 'caller' ? 'caller_inflight' : 'max_inflight'));

/** The in-flight slot of a paid call (its quota was taken when it was quoted), in the capability's turn. */
export function takeInflight(parts: AdmissionParts, cap: OfferedCapability, call: CallIn): Promise<{ release(): Promise<void> } | Refusal> {
  return gateOf(parts.host, cap.id).exclusive(() => startInflight(parts, cap, call));
}
