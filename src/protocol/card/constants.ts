// URIs of SPEC §5.2 / §5.4 and WIRE.md §3.3.
export const EXT_CARD = 'https://agentnetwork.org.cn/a2a/ext/anet-card/v1';
export const EXT_EVIDENCE = 'https://agentnetwork.org.cn/a2a/ext/anet-evidence/v1';
export const EXT_X402 = 'https://github.com/google-agentic-commerce/a2a-x402/blob/main/spec/v0.2';
export const EXT_PREVIEW = 'https://agentnetwork.org.cn/a2a/ext/anet-preview/v1';
export const EXT_PRICE = 'https://agentnetwork.org.cn/a2a/ext/anet-price/v1';
export const RELAY_BINDING = 'https://agentnetwork.org.cn/a2a/bindings/anet-relay/v1';
export const CHAT_SKILL_ID = 'chat';

/** WIRE.md §3.4 CARD_TOO_LARGE limits, inclusive. */
export const LIMITS = {
  nameBytes: 128,
  descriptionBytes: 4096,
  skills: 256,
  tagsPerSkill: 16,
  cardBytes: 64 * 1024,
  signatures: 8,
  /** Arrays and objects nested in one another (an A2A card needs about 8). */
  depth: 32,
} as const;

/** `notBefore` may be at most this far in the future (clock skew). */
export const NOT_BEFORE_SKEW_MS = 300_000;
