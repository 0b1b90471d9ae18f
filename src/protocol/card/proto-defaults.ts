// The forms of an Agent Card a signer may have canonicalised (A2A v1.0 §8.4.1). A2A cards are protobuf
// messages written as JSON, and a field holding its proto3 default (false, "", [], an empty message) means
// the same as an absent one, so signers differ in what they leave out before JCS: we sign the card exactly
// as published; A2A §8.4.1 drops default-valued fields except REQUIRED ones and those with explicit
// presence (`optional` in a2a.proto); a2a-python's MessageToDict + clean-up drops them all. A reader tries
// each, so a card signed by another implementation verifies.
//
// Only what a2a.proto declares is ever dropped, and only when it holds the default OF ITS DECLARED TYPE:
// a boolean field holding `false`, a string field holding "", a repeated field holding [], a message field
// holding {}. Anything else stays, so it must be signed: an unknown field, a `[]` where a boolean belongs
// (a reader testing truthiness would read it as true), a `null`. Never touched: the inside of a
// google.protobuf.Struct (an extension's `params`: its values are the extension's data) and the entries of
// a map (a map entry is present whatever its value; a message value is still a message). Objects are made
// without a prototype, so a member named `__proto__` is content like any other.

export type DefaultsRule = 'a2a' | 'all';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type JsonObject = { [k: string]: Json };

/** What a field of an a2a.proto message holds. */
type Field =
  | { kind: 'bool' | 'string' | 'strings' }
  | { kind: 'message' | 'messages'; shape: string }
  | { kind: 'map'; shape: string }
  | { kind: 'struct' };

interface MessageShape {
  fields: Record<string, Field>;
  /** REQUIRED fields and fields with explicit presence (`optional`): kept at their default under `a2a`. */
  keep: string[];
}

const bool: Field = { kind: 'bool' };
const string: Field = { kind: 'string' };
const strings: Field = { kind: 'strings' };
const message = (shape: string): Field => ({ kind: 'message', shape });
const messages = (shape: string): Field => ({ kind: 'messages', shape });

const SHAPES: Record<string, MessageShape> = {
  AgentCard: {
    fields: {
      name: string,
      description: string,
      supportedInterfaces: messages('AgentInterface'),
      provider: message('AgentProvider'),
      version: string,
      documentationUrl: string,
      capabilities: message('AgentCapabilities'),
      securitySchemes: { kind: 'map', shape: 'Opaque' },
      securityRequirements: messages('SecurityRequirement'),
      defaultInputModes: strings,
      defaultOutputModes: strings,
      skills: messages('AgentSkill'),
      iconUrl: string,
    },
    keep: [
      'name',
      'description',
      'supportedInterfaces',
      'version',
      'capabilities',
      'defaultInputModes',
      'defaultOutputModes',
      'skills',
      'documentationUrl',
      'iconUrl',
    ],
  },
  AgentInterface: {
    fields: { url: string, protocolBinding: string, tenant: string, protocolVersion: string },
    keep: ['url', 'protocolBinding', 'protocolVersion'],
  },
  AgentProvider: { fields: { url: string, organization: string }, keep: ['url', 'organization'] },
  AgentCapabilities: {
    fields: { streaming: bool, pushNotifications: bool, extensions: messages('AgentExtension'), extendedAgentCard: bool },
    keep: ['streaming', 'pushNotifications', 'extendedAgentCard'],
  },
  AgentExtension: { fields: { uri: string, description: string, required: bool, params: { kind: 'struct' } }, keep: [] },
  AgentSkill: {
    fields: {
      id: string,
      name: string,
      description: string,
      tags: strings,
      examples: strings,
      inputModes: strings,
      outputModes: strings,
      securityRequirements: messages('SecurityRequirement'),
    },
    keep: ['id', 'name', 'description', 'tags'],
  },
  SecurityRequirement: { fields: { schemes: { kind: 'map', shape: 'Opaque' } }, keep: [] },
  // Security schemes and string lists are carried as they are: no reader here acts on them.
  Opaque: { fields: {}, keep: [] },
};

const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);
const own = <T>(record: Record<string, T>, key: string): T | undefined => (Object.hasOwn(record, key) ? record[key] : undefined);

/** True when `value` is the proto3 default of the field's declared type. */
function isDefault(field: Field, value: Json): boolean {
  switch (field.kind) {
    case 'bool':
      return value === false;
    case 'string':
      return value === '';
    case 'strings':
    case 'messages':
      return Array.isArray(value) && value.length === 0;
    default:
      return isObject(value) && Object.keys(value).length === 0;
  }
}

/**
 * The card (without `signatures`) with default-valued fields left out: `a2a` keeps REQUIRED and
 * explicit-presence fields (the rule of A2A §8.4.1), `all` keeps none. The input is not changed.
 */
export function withoutDefaults(card: Record<string, unknown>, rule: DefaultsRule): Record<string, unknown> {
  return stripMessage(card as JsonObject, SHAPES.AgentCard!, rule);
}

function stripMessage(input: JsonObject, shape: MessageShape, rule: DefaultsRule): JsonObject {
  const out = Object.create(null) as JsonObject;
  for (const key of Object.keys(input)) {
    const value = input[key]!;
    const field = own(shape.fields, key);
    if (!field) {
      out[key] = copy(value); // not declared: content, never dropped
      continue;
    }
    const stripped = stripField(field, value, rule);
    if ((rule === 'a2a' && shape.keep.includes(key)) || !isDefault(field, stripped)) out[key] = stripped;
  }
  return out;
}

function stripField(field: Field, value: Json, rule: DefaultsRule): Json {
  if (field.kind === 'message' && isObject(value)) return stripMessage(value, SHAPES[field.shape]!, rule);
  if (field.kind === 'messages' && Array.isArray(value))
    return value.map((v) => (isObject(v) ? stripMessage(v, SHAPES[field.shape]!, rule) : copy(v)));
  if (field.kind === 'map' && isObject(value)) {
    const out = Object.create(null) as JsonObject;
    for (const key of Object.keys(value))
      out[key] = isObject(value[key]) ? stripMessage(value[key] as JsonObject, SHAPES[field.shape]!, rule) : copy(value[key]!);
    return out;
  }
  return copy(value);
}

/** A deep copy whose objects have no prototype (so `__proto__` stays an ordinary member). */
function copy(value: Json): Json {
  if (Array.isArray(value)) return value.map(copy);
  if (!isObject(value)) return value;
  const out = Object.create(null) as JsonObject;
  for (const key of Object.keys(value)) out[key] = copy(value[key]!);
  return out;
}
