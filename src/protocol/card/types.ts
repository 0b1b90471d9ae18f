// The A2A v1.0 AgentCard shape as ANet nodes emit it (a2a.proto `AgentCard`, JSON names).
export interface AgentSkill {
  id: string;
  name: string;
  description: string;
  tags: string[];
  examples?: string[];
  inputModes?: string[];
  outputModes?: string[];
}

export interface AgentExtension {
  uri: string;
  description: string;
  required: boolean;
  params?: Record<string, unknown>;
}

export interface AgentInterface {
  url: string;
  protocolBinding: string;
  protocolVersion: string;
  tenant: string;
}

export interface CardSignature {
  protected: string;
  signature: string;
}

export interface AgentCard {
  name: string;
  description: string;
  supportedInterfaces: AgentInterface[];
  version: string;
  capabilities: {
    streaming: boolean;
    pushNotifications: boolean;
    extendedAgentCard: boolean;
    extensions: AgentExtension[];
  };
  defaultInputModes: string[];
  defaultOutputModes: string[];
  skills: AgentSkill[];
  signatures?: CardSignature[];
}

/** The `anet-card` extension params: all canonical decimal strings. */
export interface CardIdentity {
  aid: string;
  seq: string;
  issuedAt: string;
  notBefore: string;
}
