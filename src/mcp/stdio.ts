// The stdio transport of `anet mcp`: newline-delimited JSON-RPC on stdin/stdout, like the MCP SDK's
// StdioServerTransport, but with a line limit that fits what a node can send. The SDK's transport keeps
// at most 10 MiB of unread input and, past it, closes itself: stdin paused, nothing answered, and the
// process ended with Node's exit code 13 (the top-level await of `anet mcp` never settled). A call with
// one file of the default `files.max_bytes` (8 MiB, ~11 MiB as base64) was such a line.
import process from 'node:process';
import type { Readable, Writable } from 'node:stream';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ErrorCode, JSONRPCMessageSchema, type JSONRPCMessage, type RequestId } from '@modelcontextprotocol/sdk/types.js';
import { MAX_MESSAGE, mib } from '../protocol/relay.js';

/** File bytes whose base64 fits in `limit` bytes of request, with 64 KiB for the rest of the request. */
const inlineFileBytes = (limit: number) => Math.max(0, Math.floor((limit - 64 * 1024) / 4) * 3);

/**
 * The longest request line read: 32 MiB (twice what one relay message carries, so every text or argument
 * document that can be sent fits, with room for escaped characters). Files inline in a line are held in
 * memory until they are uploaded as blobs (issue 20): this also bounds that, at about 24 MiB of files.
 */
export const MAX_LINE_BYTES = 2 * MAX_MESSAGE;

const NEWLINE = 0x0a;

/** What a line over the limit is answered with: one sentence naming the limit and what to do. */
export function tooLongMessage(bytes: number, limit: number): string {
  return `a request of ${bytes} bytes is over anet mcp's limit of ${limit} bytes (${mib(limit)}): files sent inline as base64 are held in memory, so a call through MCP carries at most about ${mib(inlineFileBytes(limit))} of files; send larger files with \`anet call --file\` (up to 8 × 64 MiB, read from disk), or a shorter text`;
}

export class LineStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  /** Told of each line refused for its length (with its size so far and its id, when it had one). */
  onrefused?: (bytes: number, id: RequestId | undefined) => void;

  /** The current line's chunks, before its newline. */
  private chunks: Buffer[] = [];
  private size = 0;
  /** Set while the rest of a line over the limit is read and dropped. */
  private skipping: TopLevelScanner | null = null;
  private started = false;

  constructor(
    private readonly stdin: Readable = process.stdin,
    private readonly stdout: Writable = process.stdout,
    readonly maxLineBytes = MAX_LINE_BYTES,
  ) {}

  async start(): Promise<void> {
    if (this.started) throw new Error('LineStdioTransport already started');
    this.started = true;
    this.stdin.on('data', this.ondata);
    this.stdin.on('error', this.onstreamerror);
  }

  private readonly onstreamerror = (error: Error) => this.onerror?.(error);

  private readonly ondata = (chunk: Buffer) => {
    let from = 0;
    while (from < chunk.length) {
      const nl = chunk.indexOf(NEWLINE, from);
      const end = nl === -1 ? chunk.length : nl;
      const piece = chunk.subarray(from, end);
      if (this.skipping) {
        this.skipping.scan(piece);
        this.size += piece.length;
      } else if (this.size + piece.length > this.maxLineBytes) {
        // Over the limit: what was kept goes through the scanner (for the id), then is let go.
        this.skipping = new TopLevelScanner();
        for (const c of this.chunks) this.skipping.scan(c);
        this.skipping.scan(piece);
        this.size += piece.length;
        this.chunks = [];
      } else if (piece.length > 0) {
        this.chunks.push(piece);
        this.size += piece.length;
      }
      if (nl === -1) return;
      this.endLine();
      from = nl + 1;
    }
  };

  private endLine(): void {
    const skipped = this.skipping;
    const size = this.size;
    const line = skipped ? null : this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, size);
    this.chunks = [];
    this.size = 0;
    this.skipping = null;
    if (skipped) {
      this.refuse(size, skipped);
      return;
    }
    let text = line!.toString('utf8');
    if (text.endsWith('\r')) text = text.slice(0, -1);
    if (text.trim() === '') return;
    let message: JSONRPCMessage;
    try {
      message = JSONRPCMessageSchema.parse(JSON.parse(text));
    } catch (err) {
      this.onerror?.(err as Error);
      return;
    }
    this.onmessage?.(message);
  }

  /** A request over the limit gets a JSON-RPC error with its id; a notification (no id) only the log line. */
  private refuse(bytes: number, scanned: TopLevelScanner): void {
    const id = scanned.id();
    this.onrefused?.(bytes, id);
    if (id === undefined && scanned.hasMethod()) return;
    const error = { code: ErrorCode.InvalidRequest, message: tooLongMessage(bytes, this.maxLineBytes), data: { limit: this.maxLineBytes } };
    void this.send({ jsonrpc: '2.0', ...(id !== undefined ? { id } : {}), error } as JSONRPCMessage).catch((err) =>
      this.onerror?.(err as Error),
    );
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve) => {
      if (this.stdout.write(`${JSON.stringify(message)}\n`)) resolve();
      else this.stdout.once('drain', resolve);
    });
  }

  async close(): Promise<void> {
    this.stdin.off('data', this.ondata);
    this.stdin.off('error', this.onstreamerror);
    if (this.stdin.listenerCount('data') === 0) this.stdin.pause();
    this.chunks = [];
    this.size = 0;
    this.skipping = null;
    this.onclose?.();
  }
}

/**
 * Reads a JSON object as it streams by, keeping only its top-level `id` (and whether it has a `method`):
 * what a refused request needs to be answered. Strings are skipped with indexOf, so megabytes of base64
 * cost little; nothing else of the line is kept.
 */
/** Where `byte` next occurs at or after `from`; Infinity when nowhere (so it is never looked for again). */
const nextOf = (bytes: Buffer, byte: number, from: number) => {
  const at = bytes.indexOf(byte, from);
  return at === -1 ? Infinity : at;
};

export class TopLevelScanner {
  private depth = 0;
  private inString = false;
  private escaped = false;
  /** The top-level key being read, or the last one read (its value follows). */
  private key: number[] | null = null;
  private readingKey = false;
  private expectValue = false;
  /** The raw text of the top-level `id` value, while and once read (bounded). */
  private idText: number[] | null = null;
  private capturing = false;
  private method = false;
  private static readonly MAX_ID = 256;

  scan(bytes: Buffer): void {
    // The next quote and backslash at or after i, found once per chunk position (never rescanned).
    let quote = -1;
    let slash = -1;
    let i = 0;
    while (i < bytes.length) {
      if (this.inString) {
        // Inside a string that is neither a key nor the id, jump to the next quote or backslash.
        if (!this.readingKey && !this.capturing && !this.escaped) {
          if (quote < i) quote = nextOf(bytes, 0x22, i);
          if (slash < i) slash = nextOf(bytes, 0x5c, i);
          const next = Math.min(quote, slash);
          if (next === Infinity) return;
          i = next;
        }
        const b = bytes[i++]!;
        if (this.capturing) this.keep(b);
        if (this.escaped) this.escaped = false;
        else if (b === 0x5c) this.escaped = true;
        else if (b === 0x22) {
          this.inString = this.readingKey = this.capturing = false;
          continue;
        }
        if (this.readingKey && this.key!.length < 16) this.key!.push(b);
        continue;
      }
      const b = bytes[i++]!;
      if (b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09) continue;
      if (this.capturing) {
        // A top-level number or literal ends at the first structural character.
        if (b !== 0x2c && b !== 0x7d && b !== 0x5d) {
          this.keep(b);
          continue;
        }
        this.capturing = false;
      }
      const valueHere = this.depth === 1 && this.expectValue;
      if (b === 0x22) {
        this.inString = true;
        if (this.depth === 1 && !this.expectValue) {
          this.readingKey = true;
          this.key = [];
        }
      } else if (b === 0x3a) {
        if (this.depth === 1) this.expectValue = true;
        continue;
      } else if (b === 0x2c) {
        if (this.depth === 1) this.expectValue = false;
        continue;
      } else if (b === 0x7b || b === 0x5b) {
        this.depth++;
      } else if (b === 0x7d || b === 0x5d) {
        this.depth--;
        continue;
      }
      if (valueHere) {
        // A top-level value starts here: a string, an object or array, a number or a literal.
        if (this.isKey('id') && b !== 0x7b && b !== 0x5b) {
          this.capturing = true;
          this.idText = [b];
        }
        if (this.isKey('method')) this.method = true;
        this.expectValue = false;
      }
    }
  }

  private isKey(name: string): boolean {
    return this.key !== null && Buffer.from(this.key).toString('latin1') === name;
  }

  private keep(b: number): void {
    if (this.idText && this.idText.length <= TopLevelScanner.MAX_ID) this.idText.push(b);
  }

  hasMethod(): boolean {
    return this.method;
  }

  /** The top-level id, when it was a string or an integer read whole. */
  id(): RequestId | undefined {
    if (!this.idText || this.idText.length > TopLevelScanner.MAX_ID) return undefined;
    try {
      const value: unknown = JSON.parse(Buffer.from(this.idText).toString('utf8'));
      return typeof value === 'string' || (typeof value === 'number' && Number.isSafeInteger(value)) ? value : undefined;
    } catch {
      return undefined;
    }
  }
}
