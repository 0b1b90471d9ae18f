// The public card (SPEC §5.1, §5.2): built from config + profile, never with a price, null when nothing is
// offered and the policy is not open. Same content gives the same card (the caller decides on seq).
import type { Config } from '../config/schema.js';
import { offeredCapabilities, type OfferedCapability } from '../config/check.js';
import { EXT_CARD, EXT_EVIDENCE, EXT_X402, EXT_PREVIEW, RELAY_BINDING, CHAT_SKILL_ID } from '../protocol/card/constants.js';
import type { AgentCard, AgentSkill, AgentExtension } from '../protocol/card/types.js';
import canonicalize from 'canonicalize';

export interface Profile {
  name?: string;
  description?: string;
}

export interface CardStamp {
  seq: bigint;
  issuedAt: number;
  notBefore: number;
}

export const defaultName = (aid: string) => `anet agent ${aid.slice(0, 12)}`;

export function skillOf(cap: OfferedCapability): AgentSkill {
  const s = cap.service;
  const skill: AgentSkill = {
    id: cap.id,
    name: s.name || cap.id,
    description: s.description || cap.id,
    tags: s.tags && s.tags.length > 0 ? [...s.tags] : [cap.id],
  };
  // Empty arrays are left out, never published (WIRE.md §3.1).
  if (s.examples?.length) skill.examples = [...s.examples];
  if (s.input_modes?.length) skill.inputModes = [...s.input_modes];
  if (s.output_modes?.length) skill.outputModes = [...s.output_modes];
  return skill;
}

export const CHAT_SKILL: AgentSkill = {
  id: CHAT_SKILL_ID,
  name: 'chat',
  description: "Text tasks in natural language, answered by this node's own agent.",
  tags: ['chat'],
};

export const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** The public capabilities that go on the public card: offered and not allow_only, sorted by id. */
export function listedCapabilities(config: Config): OfferedCapability[] {
  return offeredCapabilities(config)
    .filter((c) => !c.inbound.allow_only)
    .sort(byId);
}

export const isPriced = (cap: OfferedCapability) => (cap.service.price ?? 0n) > 0n;

/** The card content without signature and stamp, or null when the node publishes no card. */
export function buildPublicCard(config: Config, profile: Profile, aid: string, stamp: CardStamp): AgentCard | null {
  const listed = listedCapabilities(config);
  const open = config.inbound.policy === 'open';
  const skills = listed.map(skillOf);
  if (open) skills.push(CHAT_SKILL);
  if (skills.length === 0) return null;
  skills.sort(byId);
  return {
    name: profile.name || defaultName(aid),
    description: profile.description || `An ANet node offering ${skills.map((s) => s.id).join(', ')}.`,
    supportedInterfaces: [
      { url: `${config.hub.replace(/\/+$/, '')}/relay/v2`, protocolBinding: RELAY_BINDING, protocolVersion: '1.0', tenant: aid },
    ],
    version: '1.0.0',
    capabilities: {
      streaming: false,
      pushNotifications: false,
      extendedAgentCard: true,
      extensions: extensions(config, listed, open, aid, stamp),
    },
    defaultInputModes: ['application/json', 'text/plain'],
    defaultOutputModes: ['application/json', 'text/plain'],
    skills,
  };
}

function extensions(config: Config, listed: OfferedCapability[], open: boolean, aid: string, stamp: CardStamp): AgentExtension[] {
  const out: AgentExtension[] = [
    {
      uri: EXT_CARD,
      description: 'ANet identity of this card: the AID, its sequence number and issue time.',
      required: false,
      params: { aid, seq: stamp.seq.toString(), issuedAt: String(stamp.issuedAt), notBefore: String(stamp.notBefore) },
    },
    {
      uri: EXT_EVIDENCE,
      description: 'Completed tasks carry a receipt signed by this node and anet.* metadata.',
      required: false,
    },
  ];
  const priced = listed.filter(isPriced);
  if (priced.length > 0) {
    // Required only when EVERY listed skill is priced, so never when chat is listed (SPEC §5.2).
    const required = !open && priced.length === listed.length;
    out.push({ uri: EXT_X402, description: 'Payments follow x402 over the hub ledger; prices are on the extended card.', required });
  }
  if (config.modules.preview.enabled && (config.modules.agent !== undefined || listed.length > 0)) {
    out.push({ uri: EXT_PREVIEW, description: 'This node sends progress previews during tasks.', required: false });
  }
  return out;
}

/** The content that decides whether a new seq is due: the card without its anet-card stamp. */
export function cardContentKey(card: AgentCard): string {
  const stripped = {
    ...card,
    capabilities: {
      ...card.capabilities,
      extensions: card.capabilities.extensions.map((e) => (e.uri === EXT_CARD ? { ...e, params: { aid: e.params?.aid } } : e)),
    },
  };
  delete (stripped as { signatures?: unknown }).signatures;
  return canonicalize(stripped)!;
}
