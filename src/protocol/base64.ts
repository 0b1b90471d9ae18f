// Standard padded base64 in its one canonical form (PROTOCOL §1.2): what a file's `data_b64` must be,
// checked by the caller's node when it takes one inline and by a provider that gets one from an older node.
const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/**
 * Standard padded base64 in its one canonical form (RFC 4648 §4, §3.5: the bits the padding leaves over
 * are zero), so the service gets exactly the text an encoder writes for those bytes: `YR==` decodes
 * to "a" in lenient decoders and fails in strict ones. Not one regex of 4-character groups: V8
 * backtracks through every group and its stack overflows past ~4.5 MB of text, so a file of the default
 * 8 MiB made the handler throw.
 */
export function isStrictBase64(text: string): boolean {
  if (text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) return false;
  const pad = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  if (pad === 0) return true;
  const last = B64.indexOf(text[text.length - pad - 1]!);
  return last % (pad === 2 ? 16 : 4) === 0;
}
