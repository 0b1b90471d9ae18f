// A sample service that takes large files without holding them (SPEC §3, issue 20): it reads the call's
// body `{"args": …, "files": [{"name", "mime", "data_b64"}, …]}` as it arrives, decodes each file's base64
// on the fly and answers each file's name, media type, size and sha-256. A body with 8 files of 64 MiB is
// ~683 MiB of JSON — more than one JavaScript string may hold — so a service meant for large files reads it
// like this (or with any streaming JSON parser), never with JSON.parse of the whole body. Used by the tests
// and `bench/files`; a starting point for a service developer.
import { createHash, type Hash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { chmod, unlink } from 'node:fs/promises';

export interface FileDigest {
  name: string;
  mime: string;
  bytes: number;
  sha256: string;
}

export interface DigestService {
  socketPath: string;
  server: Server;
  /** Each call's files, as answered, in order. */
  calls: FileDigest[][];
  close(): Promise<void>;
}

const MARK = '"data_b64":"';

/** Reads one body: every byte outside the files' base64 kept (small), each file's base64 decoded and hashed as it comes. */
export async function digestBody(req: AsyncIterable<Buffer>): Promise<{ args: unknown; files: FileDigest[] }> {
  // The JSON with each data_b64 emptied: small (arguments, names, types), parsed at the end.
  let skeleton = '';
  /** Where the text after the last mark found starts: marks are never searched before it. */
  let searched = 0;
  let file: { hash: Hash; bytes: number; carry: string } | null = null;
  const done: { bytes: number; sha256: string }[] = [];
  const feed = (b64: string) => {
    const text = file!.carry + b64;
    const whole = text.length - (text.length % 4);
    const bytes = Buffer.from(text.slice(0, whole), 'base64');
    file!.hash.update(bytes);
    file!.bytes += bytes.length;
    file!.carry = text.slice(whole);
  };
  for await (const chunk of req) {
    // latin1 keeps every byte as one character: UTF-8 names are decoded again at the end.
    let s = chunk.toString('latin1');
    while (s.length > 0) {
      if (!file) {
        // A mark may span two chunks: search from just before the text appended, never before the last mark's end.
        const from = Math.max(searched, skeleton.length - MARK.length + 1);
        skeleton += s;
        s = '';
        const at = skeleton.indexOf(MARK, from);
        if (at < 0) continue;
        s = skeleton.slice(at + MARK.length);
        skeleton = skeleton.slice(0, at + MARK.length);
        searched = skeleton.length;
        file = { hash: createHash('sha256'), bytes: 0, carry: '' };
        continue;
      }
      const end = s.indexOf('"');
      feed(end < 0 ? s : s.slice(0, end));
      if (end < 0) break;
      done.push({ bytes: file.bytes, sha256: file.hash.digest('hex') });
      file = null;
      s = s.slice(end);
    }
  }
  const parsed = JSON.parse(Buffer.from(skeleton, 'latin1').toString('utf8')) as {
    args: unknown;
    files?: { name: string; mime: string }[];
  };
  return { args: parsed.args, files: (parsed.files ?? []).map((f, i) => ({ name: f.name, mime: f.mime, ...done[i]! })) };
}

export async function startDigestService(socketPath: string): Promise<DigestService> {
  await unlink(socketPath).catch(() => {});
  const calls: FileDigest[][] = [];
  const server = createServer(async (req: IncomingMessage, res) => {
    try {
      const { files } = await digestBody(req);
      calls.push(files);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ files }));
    } catch (err) {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: `cannot read the call: ${(err as Error).message}` }));
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve());
  });
  await chmod(socketPath, 0o600);
  return {
    socketPath,
    server,
    calls,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
