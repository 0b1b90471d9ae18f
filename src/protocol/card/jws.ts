// Detached JWS over the JCS form of the card (WIRE.md §3.1–3.2).
import canonicalize from 'canonicalize';
import type { Signer } from '../../identity/ed25519.js';
import type { AgentCard, CardSignature } from './types.js';

export const b64url = (bytes: Uint8Array | string) => Buffer.from(bytes).toString('base64url');

/** Strict base64url: the alphabet only, no padding, and the canonical encoding of its bytes. */
export function fromB64url(text: string): Uint8Array | null {
  if (!/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1) return null;
  const bytes = Buffer.from(text, 'base64url');
  return bytes.toString('base64url') === text ? new Uint8Array(bytes) : null;
}

/** The signed payload: the card without `signatures`, as RFC 8785 canonical JSON. */
export function cardPayload(card: AgentCard | Record<string, unknown>): string {
  const { signatures: _drop, ...rest } = card as Record<string, unknown>;
  return canonicalize(rest)!;
}

export function protectedHeader(hub: string, aid: string, ksn: number): string {
  return canonicalize({
    alg: 'EdDSA',
    jku: `${hub.replace(/\/+$/, '')}/agents/${aid}/jwks.json`,
    kid: `did:anet:${aid}#${ksn}`,
    typ: 'JOSE',
  })!;
}

export function signCard(card: AgentCard, signer: Signer, hub: string, aid: string, ksn: number): AgentCard {
  const protectedB64 = b64url(protectedHeader(hub, aid, ksn));
  const input = `${protectedB64}.${b64url(cardPayload(card))}`;
  const signature: CardSignature = { protected: protectedB64, signature: b64url(signer.sign(Buffer.from(input))) };
  return { ...card, signatures: [signature] };
}
