// Text from elsewhere (a hub's error, a peer's words) put on one line of our output.

// Control characters are what this strips: another party's text must not move the terminal's cursor.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f]+/g;

/** `text` without control characters, trimmed, cut to `max` characters with an ellipsis. */
export function oneLine(text: unknown, max: number): string {
  const line = String(text).replace(CONTROL, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}
