// Blob routes over plain HTTP for the tests (PROTOCOL §8.11): a PUT whose body the test sends as it
// likes, and an answer read whole.
import { createHash } from 'node:crypto';
import { type ClientRequest, type IncomingMessage, request } from 'node:http';
import { blobCid } from '../../src/protocol/blob-address.js';

/** The address of `bytes` as a blob. */
export const cidOf = (bytes: Uint8Array) => blobCid(createHash('sha256').update(bytes).digest());

export interface Answer {
  status: number;
  headers: IncomingMessage['headers'];
  body: Buffer;
  json: () => any;
}

export function collect(res: IncomingMessage): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    res.on('data', (c: Buffer) => parts.push(c));
    res.on('error', reject);
    res.on('end', () => {
      const body = Buffer.concat(parts);
      resolve({ status: res.statusCode ?? 0, headers: res.headers, body, json: () => JSON.parse(body.toString('utf8')) });
    });
  });
}

/** A PUT of `cid` whose body the test sends; `answer` settles with the hub's answer. */
export function putting(url: string, cid: string, size: number, offset: number, length: number) {
  let req!: ClientRequest;
  const answer = new Promise<Answer>((resolve, reject) => {
    req = request(
      `${url}/blobs/${cid}`,
      {
        method: 'PUT',
        headers: { 'x-anet-blob-size': String(size), 'x-anet-blob-offset': String(offset), 'content-length': String(length) },
      },
      (res) => void collect(res).then(resolve, reject),
    );
    req.on('error', reject);
  });
  return { req, answer };
}

/** PUT /blobs/<cid> with `body` whole. */
export function put(url: string, cid: string, size: number, offset: number, body: Uint8Array): Promise<Answer> {
  const { req, answer } = putting(url, cid, size, offset, body.length);
  req.end(body);
  return answer;
}
