// The relay's wire (PROTOCOL §5): how big one message and one envelope may be, how many files fit in a
// message, the upstream's protocol name and frame, and what a sender learns of one envelope. The hub's
// relay (src/hub/relay.ts), the node's relay client, the config check, the A2A endpoint and the MCP
// server all use these numbers, so they live here and not in any of them.
import { createHash } from 'node:crypto';

export const MIB = 1024 * 1024;

/**
 * The largest padded inner message the relay carries. Files do not ride in messages (they are blobs,
 * PROTOCOL §8.11, issue 20); it was sized for one file of the default 8 MiB as base64 when they did, and
 * is kept so nodes from before blobs still reach each other. 32 MiB would double what every queued or
 * in-flight envelope may cost the hub.
 */
export const MAX_MESSAGE = 16 * MIB;

/** Room for the outer CBOR map around the ciphertext: recipient AID, kid, enc, AEAD tag, heads (~150 bytes). */
const OUTER_ROOM = 4096;

/** The one envelope limit: the hub's send body, the client's stream frames, the local A2A body all use it. */
export const MAX_ENVELOPE = MAX_MESSAGE + OUTER_ROOM;

/** Sizes in the lines people read: `16 MiB`, `57.3 MiB`. */
export const mib = (bytes: number) => `${Number((bytes / MIB).toFixed(1))} MiB`;

/**
 * The upstream (`GET /relay/v2/upstream`, `Upgrade: anet-relay-upstream`): one anonymous connection on
 * which a node sends envelopes as frames and reads one answer frame per envelope, in order — a JSON
 * RelayAnswer, as the body of a POST send would be. It saves each send an HTTP request and response (on
 * both sides, the larger part of a send's cost). A hub that does not upgrade gets POSTs instead.
 */
export const UPSTREAM_PROTOCOL = 'anet-relay-upstream';

/**
 * The largest envelope sent on an upstream; larger ones are POSTed. Answers come in order, so a 16 MiB
 * upload there would hold up every small message behind it; this also bounds what one connection holds.
 */
export const UPSTREAM_MAX = 256 * 1024;

/** What a sender learns of one envelope: taken (pushed or queued), or refused with an HTTP status and code. */
export type RelayAnswer = { outcome: 'delivered' | 'queued' } | { error: { status: number; code: string; message: string } };

/** One frame on a stream: 4-byte big-endian length, then the envelope. */
export function frame(bytes: Uint8Array): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt32BE(bytes.length);
  return Buffer.concat([head, bytes]);
}

/**
 * An envelope's mail id: the hex sha256 of its bytes. The hub keeps an envelope under it until the
 * recipient acknowledges it (POST /relay/v2/ack), and the recipient computes it from the frame it got.
 */
export const mailId = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

/** A stream opened with this request header set to `1` keeps its envelopes at the hub until acknowledged. */
export const ACK_HEADER = 'x-anet-ack';

/** The ids one acknowledgement may name. */
export const MAX_ACK_IDS = 1000;
