// The admission checks that read no quota or slot (SPEC §4, §4.1), in the spec's order, first refusal
// wins: the deny list; unknown, hidden or allow_only-for-a-stranger ids (one reply for all of them);
// the arguments; the files. Stateless: they journal nothing (the quotas and the in-flight slot are
// taken after them, in slots.ts).
import { fileTypeFromBuffer } from 'file-type';
import type { Config } from '../../config/schema.js';
import { offeredCapabilities, type OfferedCapability } from '../../config/check.js';
import { standing } from '../../contacts/lists.js';
import type { FileRef } from '../../protocol/file-ref.js';
import { sniffBlob, type FileOut } from './files.js';

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
  const out: FileOut[] = [];
  for (const [i, f] of files.entries()) {
    if ('ref' in f) {
      const out1 = await checkBlobFile(hub, rule, f.ref, i);
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

/**
 * A file sent as a blob: its size from the reference (before any byte is fetched), then its media type
 * from the first chunk alone. A line for `files_not_accepted`, or the file as the service will get it.
 */
async function checkBlobFile(hub: string, rule: FilesRule, ref: FileRef | { error: string }, i: number): Promise<FileOut | string> {
  if ('error' in ref) return `file ${i + 1}: ${ref.error}`;
  const name = safeFileName(ref.name, i);
  const label = `file ${i + 1} (${[...name].slice(0, 64).join('')})`;
  if (ref.size > rule.max_bytes) return `${label}: ${ref.size} bytes; at most ${rule.max_bytes}`;
  let mime: string;
  try {
    mime = await sniffBlob(hub, ref);
  } catch (err) {
    return `${label}: cannot be read from the hub: ${(err as Error).message}`;
  }
  if (!accepts(rule.media_types, mime)) return `${label}: detected ${mime}, not one of ${rule.media_types.join(', ')}`;
  return { name, mime, ref };
}
