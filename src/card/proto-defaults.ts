// The forms of an Agent Card a signer may have canonicalised (A2A v1.0 §8.4.1). A2A cards are protobuf
// messages written as JSON, and a field holding its proto3 default (false, 0, "", [], {}) means the same
// as an absent one, so signers differ in what they leave out before JCS: we sign the card exactly as
// published; A2A §8.4.1 drops default-valued fields except REQUIRED ones and those with explicit presence
// (`optional` in a2a.proto); a2a-python's MessageToDict + clean-up drops them all. A reader tries each,
// so a card signed by another implementation verifies. What is never touched: the inside of a
// google.protobuf.Struct (an extension's `params`: its values are the extension's data, and dropping an
// empty one there would change what was signed) and the entries of a map (`securitySchemes`, a security
// requirement's `schemes`: a map entry is present whatever its value; a message value is still a message).

export type DefaultsRule = 'a2a' | 'all';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type JsonObject = { [k: string]: Json };

/** The a2a.proto messages of a card, by JSON name: what each keeps and what its fields hold. */
interface MessageShape {
  /** REQUIRED fields and fields with explicit presence (`optional`): kept at their default under `a2a`. */
  keep: string[];
  /** Fields holding messages (or repeated messages), by the name of their shape. */
  messages?: Record<string, string>;
  /** map<string, Message> fields, by the name of the values' shape. */
  maps?: Record<string, string>;
  /** google.protobuf.Struct fields. */
  structs?: string[];
}

const SHAPES: Record<string, MessageShape> = {
  AgentCard: {
    keep: ['name', 'description', 'supportedInterfaces', 'version', 'capabilities', 'defaultInputModes', 'defaultOutputModes', 'skills', 'documentationUrl', 'iconUrl'],
    messages: { supportedInterfaces: 'AgentInterface', provider: 'AgentProvider', capabilities: 'AgentCapabilities', skills: 'AgentSkill', securityRequirements: 'SecurityRequirement' },
    maps: { securitySchemes: 'Other' },
  },
  AgentInterface: { keep: ['url', 'protocolBinding', 'protocolVersion'] },
  AgentProvider: { keep: ['url', 'organization'] },
  AgentCapabilities: { keep: ['streaming', 'pushNotifications', 'extendedAgentCard'], messages: { extensions: 'AgentExtension' } },
  AgentExtension: { keep: [], structs: ['params'] },
  AgentSkill: { keep: ['id', 'name', 'description', 'tags'], messages: { securityRequirements: 'SecurityRequirement' } },
  SecurityRequirement: { keep: [], maps: { schemes: 'Other' } },
  // Security schemes and string lists: their fields are stripped alike, with nothing kept.
  Other: { keep: [] },
};

const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

function isDefault(v: Json): boolean {
  if (v === false || v === 0 || v === '' || v === null) return true;
  if (Array.isArray(v)) return v.length === 0;
  return isObject(v) && Object.keys(v).length === 0;
}

/**
 * The card (without `signatures`) with default-valued fields left out: `a2a` keeps REQUIRED and
 * explicit-presence fields (the rule of A2A §8.4.1), `all` keeps none. The input is not changed.
 */
export function withoutDefaults(card: Record<string, unknown>, rule: DefaultsRule): Record<string, unknown> {
  return stripMessage(card as JsonObject, SHAPES.AgentCard!, rule);
}

function stripMessage(message: JsonObject, shape: MessageShape, rule: DefaultsRule): JsonObject {
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(message)) {
    const stripped = stripField(key, value, shape, rule);
    if ((rule === 'a2a' && shape.keep.includes(key)) || !isDefault(stripped)) out[key] = stripped;
  }
  return out;
}

function stripField(key: string, value: Json, shape: MessageShape, rule: DefaultsRule): Json {
  if (shape.structs?.includes(key)) return value;
  const mapOf = shape.maps?.[key];
  if (mapOf && isObject(value)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, isObject(v) ? stripMessage(v, SHAPES[mapOf]!, rule) : v]));
  }
  const inner = SHAPES[shape.messages?.[key] ?? 'Other']!;
  if (Array.isArray(value)) return value.map((v) => (isObject(v) ? stripMessage(v, inner, rule) : v));
  if (isObject(value)) return stripMessage(value, inner, rule);
  return value;
}
