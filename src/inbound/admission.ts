// Inbound decisions for a capability call (SPEC §4, §4.1), in the spec's order, first refusal wins:
// deny list; unknown, hidden or allow_only-for-a-stranger ids (one reply for all of them); then the
// argument, file, quota and concurrency checks. Quotas are the bucket machines (exact sliding windows,
// journaled); a call refused by a later check gives back the slots an earlier one took, so a refused
// call consumes nothing. Concurrency is the in-flight machines, released when the call ends.
import { fileTypeFromBuffer } from 'file-type';
import type { Config } from '../config/schema.js';
import { offeredCapabilities, type OfferedCapability } from '../config/check.js';
import type { ActorHost } from '../runtime/host.js';
import type { BucketContext } from '../../machines/bucket.js';
import type { InflightContext } from '../../machines/inflight.js';
import { standing } from './lists.js';
import { KeyedSerial } from '../runtime/serial.js';

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

const STRICT_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

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
    const label = `file ${i + 1}${typeof f?.name === 'string' ? ` (${f.name.slice(0, 64)})` : ''}`;
    if (typeof f?.data_b64 !== 'string' || !STRICT_BASE64.test(f.data_b64)) return no(`${label}: not standard padded base64`);
    const bytes = Buffer.from(f.data_b64, 'base64');
    if (bytes.length > rule.max_bytes) return no(`${label}: ${bytes.length} bytes; at most ${rule.max_bytes}`);
    // The type is the node's own reading of the bytes; the caller's claim is ignored (SPEC §3).
    const mime = (await fileTypeFromBuffer(bytes))?.mime ?? 'application/octet-stream';
    if (!accepts(rule.media_types, mime)) return no(`${label}: detected ${mime}, not one of ${rule.media_types.join(', ')}`);
    out.push({ name: typeof f.name === 'string' ? f.name : `file${i + 1}`, mime, data_b64: f.data_b64 });
  }
  return out;
}

/** Admissions of one capability, one at a time (per host). */
const admitting = new WeakMap<ActorHost, KeyedSerial>();

/**
 * Quotas, then concurrency; every slot taken before a refusal is given back. One admission per
 * capability at a time: a call that a later window refuses must not hold an earlier window's slot while
 * another caller's call is checked (it would be refused for a slot nobody ends up using).
 */
export function takeSlots(parts: AdmissionParts, checked: Checked, call: CallIn, opts: SlotOptions = {}): Promise<Admission> {
  let serial = admitting.get(parts.host);
  if (!serial) admitting.set(parts.host, (serial = new KeyedSerial()));
  return serial.run(checked.capability.id, () => takeSlotsNow(parts, checked, call, opts));
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
  const windows: [string, { limit: number; windowMs: number }, Refusal['reason']][] = [
    [ids.callerMin, { limit: limits.per_caller_per_min, windowMs: MINUTE }, 'quota_caller_per_min'],
    [ids.callerDay, { limit: limits.per_caller_per_day, windowMs: DAY }, 'quota_caller_per_day'],
    [ids.globalMin, { limit: limits.global_per_min, windowMs: MINUTE }, 'quota_global_per_min'],
  ];
  const taken: [string, number][] = [];
  const giveBack = () => Promise.all(taken.map(([actor, stamp]) => host.send(actor, 'bucket', undefined, { type: 'UNDO', stamp })));
  // All three windows in one journal batch; the first refusal in the table's order is the reason.
  const results = await Promise.all(windows.map(([actor, input]) => host.send(actor, 'bucket', input, { type: 'ADMIT' })));
  let refusal: Refusal | null = null;
  results.forEach((snap, i) => {
    const ctx = snap.context as BucketContext;
    const [actor, , reason] = windows[i]!;
    if (ctx.last?.admitted) taken.push([actor, ctx.stamps[ctx.stamps.length - 1]!]);
    else refusal ??= refuse(reason, { retryAfterMs: (ctx.last as { retryAfterMs: number }).retryAfterMs });
  });
  if (refusal) {
    await giveBack();
    return { ...(refusal as Refusal), listed };
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
  const id = actors(cap.id, call.from).inflight;
  const limits = cap.inbound;
  const slot = (await parts.host.send(id, 'inflight', { max: limits.max_inflight, perCaller: limits.per_caller_inflight }, { type: 'START', id: call.id, caller: call.from })).context as InflightContext;
  if (!slot.last?.started) return refuse(slot.last?.full === 'caller' ? 'caller_inflight' : 'max_inflight');
  let released = false;
  return {
    release: async () => {
      if (released) return;
      released = true;
      await parts.host.send(id, 'inflight', undefined, { type: 'FINISH', id: call.id });
    },
  };
}

/** The in-flight slot of a paid call (its quota was taken when it was quoted), in the capability's turn. */
export function takeInflight(parts: AdmissionParts, cap: OfferedCapability, call: CallIn): Promise<{ release(): Promise<void> } | Refusal> {
  let serial = admitting.get(parts.host);
  if (!serial) admitting.set(parts.host, (serial = new KeyedSerial()));
  return serial.run(cap.id, () => startInflight(parts, cap, call));
}
