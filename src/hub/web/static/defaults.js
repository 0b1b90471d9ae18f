// The forms of a card another A2A signer may have canonicalised (PROTOCOL §3.5, A2A v1.0 §8.4.1): default-
// valued fields of a2a.proto left out, keeping REQUIRED and explicit-presence ones (`a2a`) or none (`all`).
// A port of src/protocol/card/proto-defaults.ts (its comments say why each rule is so): only declared
// fields holding the default of their declared type are left out; a Struct's inside and map entries never.

const bool = { kind: 'bool' };
const string = { kind: 'string' };
const strings = { kind: 'strings' };
const message = (shape) => ({ kind: 'message', shape });
const messages = (shape) => ({ kind: 'messages', shape });

const SHAPES = {
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
  Opaque: { fields: {}, keep: [] },
};

const isObject = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);
const own = (record, key) => (Object.hasOwn(record, key) ? record[key] : undefined);

function isDefault(field, value) {
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

/** The card (without `signatures`) with default-valued fields left out by `rule` ('a2a' or 'all'). */
export function withoutDefaults(card, rule) {
  return stripMessage(card, SHAPES.AgentCard, rule);
}

function stripMessage(input, shape, rule) {
  const out = Object.create(null);
  for (const key of Object.keys(input)) {
    const value = input[key];
    const field = own(shape.fields, key);
    if (!field) {
      out[key] = copy(value);
      continue;
    }
    const stripped = stripField(field, value, rule);
    if ((rule === 'a2a' && shape.keep.includes(key)) || !isDefault(field, stripped)) out[key] = stripped;
  }
  return out;
}

function stripField(field, value, rule) {
  if (field.kind === 'message' && isObject(value)) return stripMessage(value, SHAPES[field.shape], rule);
  if (field.kind === 'messages' && Array.isArray(value))
    return value.map((v) => (isObject(v) ? stripMessage(v, SHAPES[field.shape], rule) : copy(v)));
  if (field.kind === 'map' && isObject(value)) {
    const out = Object.create(null);
    for (const key of Object.keys(value))
      out[key] = isObject(value[key]) ? stripMessage(value[key], SHAPES[field.shape], rule) : copy(value[key]);
    return out;
  }
  return copy(value);
}

function copy(value) {
  if (Array.isArray(value)) return value.map(copy);
  if (!isObject(value)) return value;
  const out = Object.create(null);
  for (const key of Object.keys(value)) out[key] = copy(value[key]);
  return out;
}
