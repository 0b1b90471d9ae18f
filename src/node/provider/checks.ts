// The admission checks that read no quota or slot (SPEC §4, §4.1), in the spec's order, first refusal
// wins: the deny list; unknown, hidden or allow_only-for-a-stranger ids (one reply for all of them);
// the arguments; the files. Stateless: they journal nothing (the quotas and the in-flight slot are
// taken after them, in slots.ts).
import { fileTypeFromBuffer } from 'file-type';
import type { Config } from '../../config/schema.js';
import { offeredCapabilities, type OfferedCapability } from '../../config/check.js';
import { standing } from '../../contacts/lists.js';
import { isStrictBase64 } from '../../protocol/base64.js';
import type { FileRef } from '../../protocol/file-ref.js';
import { SNIFF_DEADLINE_MS, sniffBlob, type FileOut } from './files.js';

/** What the checks use of the node: the peer lists (in the data dir) and the config (its hub holds file blobs). */
export interface CheckParts {
  dataDir: string;
  config: Config;
}

/** A file as `task.send` carries it: a blob reference (or what is wrong with it), or inline base64 from an older node. */
export type FileIn =
  | {
      name: string;
      /** What the caller claims; ignored (the node detects the type itself). */
      mime?: string;
      data_b64: string;
    }
  | { ref: FileRef | { error: string } };

export interface CallIn {
  id: string;
  from: string;
  capability: string;
  args: unknown;
  /** Bytes of the argument document as received (UTF-8 JSON); measured from `args` when absent. */
  argsBytes?: number;
  files?: FileIn[];
}

export type { FileOut };

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

/** A call that passed the checks: its capability, its files as the service gets them, the caller's standing. */
export interface Checked {
  capability: OfferedCapability;
  files: FileOut[];
  listed: boolean;
}

export const refusal = (reason: Refusal['reason'], extra: Omit<Refusal, 'admitted' | 'reason'> = {}): Refusal => ({
  admitted: false,
  reason,
  ...extra,
});

/** Every check that reads no quota or slot: lists, the id, the arguments, the files. */
export async function precheck(parts: CheckParts, call: CallIn): Promise<Checked | (Refusal & { listed?: boolean })> {
  const who = await standing(parts.dataDir, parts.config, call.from);
  if (who === 'denied') return refusal('not_accepting');
  const cap = offeredCapabilities(parts.config).find((c) => c.id === call.capability);
  const listed = who === 'allowed' || who === 'trusted';
  // Unknown, not offered, or allow_only for an unlisted caller: one and the same reply.
  if (!cap || (cap.inbound.allow_only && !listed))
    return refusal(parts.config.inbound.policy === 'open' ? 'capability_not_public' : 'not_accepting');
  const argsRefusal = checkArgs(cap, call.args, call.argsBytes);
  if (argsRefusal) return { ...argsRefusal, listed };
  const files = await checkFiles(parts.config.hub, cap, call.files ?? []);
  if ('admitted' in files) return { ...files, listed };
  return { capability: cap, files, listed };
}

function checkArgs(cap: OfferedCapability, args: unknown, bytes?: number): Refusal | null {
  const size = bytes ?? Buffer.byteLength(JSON.stringify(args) ?? '', 'utf8');
  if (size > cap.inbound.max_args_bytes)
    return refusal('args_too_large', { detail: `${size} bytes; at most ${cap.inbound.max_args_bytes}` });
  if (!args || typeof args !== 'object' || Array.isArray(args))
    return refusal('bad_args', { detail: 'the arguments must be a JSON object' });
  const dollar = Object.keys(args).find((k) => k.startsWith('$'));
  if (dollar !== undefined) return refusal('bad_args', { detail: `top-level key "${dollar}" begins with $` });
  return null;
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
  let safe = base
    .replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu, '')
    .trim()
    .replace(/^[.\s]+/, '');
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

async function checkFiles(hub: string, cap: OfferedCapability, files: FileIn[]): Promise<FileOut[] | Refusal> {
  const rule = cap.inbound.files;
  const no = (detail: string) => refusal('files_not_accepted', { detail });
  if (files.length === 0) return [];
  if (!rule) return no('this capability takes no files');
  if (files.length > rule.max_count) return no(`${files.length} files; at most ${rule.max_count}`);
  // Every reference checked before any byte is read; then all first chunks within one deadline.
  const refProblem = refProblems(rule, files);
  if (refProblem) return no(refProblem);
  const deadline = AbortSignal.timeout(SNIFF_DEADLINE_MS);
  const out: FileOut[] = [];
  for (const [i, f] of files.entries()) {
    if ('ref' in f) {
      const out1 = await sniffBlobFile(hub, rule, f.ref as FileRef, i, deadline);
      if (typeof out1 === 'string') return no(out1);
      out.push(out1);
      continue;
    }
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

type FilesRule = NonNullable<OfferedCapability['inbound']['files']>;

/** What is wrong with a call's blob references, read from the references alone: a line, or null. */
function refProblems(rule: FilesRule, files: FileIn[]): string | null {
  const seen = new Set<string>();
  for (const [i, f] of files.entries()) {
    if (!('ref' in f)) continue;
    const ref = f.ref;
    if ('error' in ref) return `file ${i + 1}: ${ref.error}`;
    const label = `file ${i + 1} (${[...safeFileName(ref.name, i)].slice(0, 64).join('')})`;
    if (ref.size > rule.max_bytes) return `${label}: ${ref.size} bytes; at most ${rule.max_bytes}`;
    // One blob named twice would be read twice for one upload.
    if (seen.has(ref.cid)) return `${label}: the same blob as an earlier file`;
    seen.add(ref.cid);
  }
  return null;
}

/** A blob file's media type, from its first chunk alone: the file as the service will get it, or a line. */
async function sniffBlobFile(hub: string, rule: FilesRule, ref: FileRef, i: number, deadline: AbortSignal): Promise<FileOut | string> {
  const name = safeFileName(ref.name, i);
  const label = `file ${i + 1} (${[...name].slice(0, 64).join('')})`;
  let mime: string;
  try {
    mime = await sniffBlob(hub, ref, deadline);
  } catch (err) {
    const why = deadline.aborted ? `not read within ${SNIFF_DEADLINE_MS / 1000} s` : (err as Error).message;
    return `${label}: cannot be read from the hub: ${why}`;
  }
  if (!accepts(rule.media_types, mime)) return `${label}: detected ${mime}, not one of ${rule.media_types.join(', ')}`;
  return { name, mime, ref };
}
