// The sentences of PROTOCOL §3.7, shown beside a card's verification code.
export const CARD_CODES = {
  CARD_TOO_LARGE: 'The card exceeds a size limit (name, description, skills, tags, bytes or signatures).',
  MALFORMED_JSON: 'The card is not valid JSON (or repeats a member).',
  INVALID_CARD: 'The card does not match the Agent Card schema or its ANet fields are not canonical.',
  UNSIGNED: 'The card carries no signature.',
  BAD_SIGNATURE_HEADER: "The card's signature header is not EdDSA with a did:anet key id.",
  BINDING_MISMATCH: "The card's tenant, key id and anet-card AID are not the same AID.",
  KEL_UNAVAILABLE: "The AID's key event log could not be obtained, so the card cannot be checked.",
  UNKNOWN_AID: 'The key event log is invalid or belongs to another AID.',
  KEY_NOT_CURRENT: "The card is signed with a key that is not the AID's current key.",
  INVALID_SIGNATURE: "The card's signature does not verify: it was altered or signed by another key.",
  CARD_NOT_YET_VALID: 'The card is not valid yet (its notBefore is in the future).',
};

export const EXT_CARD = 'https://agentnetwork.org.cn/a2a/ext/anet-card/v1';
export const EXT_X402 = 'https://github.com/google-agentic-commerce/a2a-x402/blob/main/spec/v0.2';
