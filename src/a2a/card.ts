// The public card of a remote agent as a standard A2A client needs it (SPEC §12): the card verified
// like `anet card` does, with its interface pointing at this endpoint instead of the hub relay.
import type { AgentCard } from '../protocol/card/types.js';
import { HubRefusedError } from '../hub-client/client.js';
import { explain } from '../protocol/reasons.js';
import type { Operate, ReadCard } from '../node/operations.js';

/**
 * The card as served here: it also says how to authenticate (A2A v1.0 `securitySchemes`,
 * `securityRequirements`): every request needs this endpoint's bearer token.
 */
export type ServedCard = AgentCard & {
  securitySchemes: Record<string, { httpAuthSecurityScheme: { scheme: string; description: string } }>;
  securityRequirements: { schemes: Record<string, { list: string[] }> }[];
};

export type CardAnswer = { status: 200; card: ServedCard } | { status: 404 | 502; error: string; reason?: string; explanation?: string };

export async function localCard(operate: Operate, aid: string, rpcUrl: string): Promise<CardAnswer> {
  let read: ReadCard;
  try {
    read = await operate('public-card', { aid });
  } catch (err) {
    if (err instanceof HubRefusedError && err.status === 404) return { status: 404, error: `no card for ${aid} on the hub (${err.code})` };
    return { status: 502, error: (err as Error).message };
  }
  if (!read.verified || !read.card) {
    const reason = read.code ?? 'INVALID_CARD';
    return { status: 404, error: `the card of ${aid} does not verify (${reason})`, reason, explanation: explain(reason) };
  }
  return { status: 200, card: servedCard(read.card, rpcUrl) };
}

/**
 * The card's own interface is the hub relay (WIRE §3.3), which a standard client cannot speak; here it
 * is replaced by this endpoint's JSON-RPC URL, with what this endpoint offers whatever the agent's card
 * says: streaming and push notifications (this node follows the task and streams or posts its updates),
 * and the bearer token it requires. The relay signature is dropped: it covers the card as signed, not
 * this rewritten copy, so a client checking it would (rightly) fail. The verified original, signature and
 * all, is what `anet card --json` shows; this endpoint serves only cards that verified. The extended card
 * (GetExtendedAgentCard) is served the same way: a client replaces the card it holds with it, and must
 * still find this endpoint and what it offers there.
 */
export function servedCard(card: AgentCard, rpcUrl: string): ServedCard {
  const { signatures: _signed, ...rest } = card;
  return {
    ...rest,
    supportedInterfaces: [{ url: rpcUrl, protocolBinding: 'JSONRPC', protocolVersion: '1.0', tenant: '' }],
    capabilities: { ...rest.capabilities, streaming: true, pushNotifications: true },
    securitySchemes: { bearer: { httpAuthSecurityScheme: { scheme: 'Bearer', description: BEARER } } },
    securityRequirements: [{ schemes: { bearer: { list: [] } } }],
  };
}

const BEARER = 'the token in a2a.token of the node data dir (Authorization: Bearer <token>)';
