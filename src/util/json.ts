// JSON for data that leaves the process (the control socket, `--json`, MCP results): bigints and bytes have
// no JSON form of their own, so every surface writes them the same way.

/** A JSON.stringify replacer: bigints as decimal strings, bytes as hex. */
export const jsonReplacer = (_key: string, v: unknown) =>
  typeof v === 'bigint' ? v.toString() : v instanceof Uint8Array ? Buffer.from(v).toString('hex') : v;
