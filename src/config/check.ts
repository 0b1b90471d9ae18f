// Cross-field rules of SPEC §2 that a schema cannot state, each reported at its JSON path. They also run
// on a file the schema refused (as repaired by repair.ts); a rule that reads a repaired value is skipped.
import type { Config, PublicCapability, ServiceCapability } from './schema.js';
import { error, warning, type Problem } from './problem.js';
import { noFaults, type Faulty } from './repair.js';
import { parseServiceUrl } from '../service/url.js';

export const RESERVED_IDS = new Set(['chat']);

export interface OfferedCapability {
  id: string;
  inbound: PublicCapability;
  service: ServiceCapability;
}

const offeredOf = new WeakMap<Config, readonly OfferedCapability[]>();

/**
 * A capability is offered only when it is both public and served (SPEC §2). Computed once per config
 * (it is read once, at start, and never changed): admission asks for it on every call.
 */
export function offeredCapabilities(config: Config): readonly OfferedCapability[] {
  let offered = offeredOf.get(config);
  if (!offered) {
    const served = new Map(config.modules.service.capabilities.map((s) => [s.id, s]));
    offered = Object.freeze(
      config.inbound.public_capabilities.flatMap((inbound) => {
        const service = served.get(inbound.id);
        return service && !RESERVED_IDS.has(inbound.id) ? [{ id: inbound.id, inbound, service }] : [];
      }),
    );
    offeredOf.set(config, offered);
  }
  return offered;
}

const PUBLIC = 'inbound.public_capabilities';
const SERVED = 'modules.service.capabilities';

export function checkConfig(config: Config, faulty: Faulty = noFaults): Problem[] {
  return [...checkPublic(config, faulty), ...checkService(config, faulty), ...checkOther(config, faulty)];
}

function checkIds(list: { id: string }[], base: string, faulty: Faulty): Problem[] {
  const seen = new Set<string>();
  const problems: Problem[] = [];
  list.forEach(({ id }, i) => {
    if (faulty(`${base}[${i}].id`)) return;
    if (RESERVED_IDS.has(id)) problems.push(error(`${base}[${i}].id`, `"${id}" is reserved for text tasks; choose another id`));
    else if (seen.has(id)) problems.push(error(`${base}[${i}].id`, `duplicate id "${id}"`));
    seen.add(id);
  });
  return problems;
}

/**
 * The ids of a list whose values are the operator's. An entry whose id the schema refused cannot equal a
 * valid id in the other list, so leaving it out decides nothing wrongly.
 */
function idsOf(list: { id: string }[], base: string, faulty: Faulty): Set<string> {
  return new Set(list.filter((_, i) => !faulty(`${base}[${i}].id`)).map((c) => c.id));
}

function checkPublic(config: Config, faulty: Faulty): Problem[] {
  const served = idsOf(config.modules.service.capabilities, SERVED, faulty);
  // A service list the schema refused as a whole serves nothing we can know of: "not served" would be a guess.
  const servedKnown = !faulty(SERVED);
  const problems = checkIds(config.inbound.public_capabilities, PUBLIC, faulty);
  config.inbound.public_capabilities.forEach((cap, i) => {
    const at = `${PUBLIC}[${i}]`;
    if (!faulty(`${at}.per_caller_inflight`, `${at}.max_inflight`) && cap.per_caller_inflight > cap.max_inflight) {
      problems.push(error(`${at}.per_caller_inflight`, `${cap.per_caller_inflight} exceeds max_inflight ${cap.max_inflight}`));
    }
    if (servedKnown && !faulty(`${at}.id`, `${at}.files`) && !served.has(cap.id) && !RESERVED_IDS.has(cap.id)) {
      if (cap.files) problems.push(error(`${at}.files`, `"${cap.id}" accepts files but no modules.service.capabilities entry serves it`));
      else problems.push(warning(`${at}.id`, `"${cap.id}" is not offered: no modules.service.capabilities entry serves it`));
    }
  });
  return problems;
}

function checkService(config: Config, faulty: Faulty): Problem[] {
  const service = config.modules.service;
  const published = idsOf(config.inbound.public_capabilities, PUBLIC, faulty);
  const publishedKnown = !faulty(PUBLIC);
  const problems = checkIds(service.capabilities, SERVED, faulty);
  if (service.token_file !== undefined && !service.token_file.startsWith('/')) {
    problems.push(error('modules.service.token_file', 'must be an absolute path'));
  }
  service.capabilities.forEach((cap, i) => {
    const at = `${SERVED}[${i}]`;
    const url = faulty(`${at}.url`) ? null : parseServiceUrl(cap.url);
    if (url && 'error' in url) problems.push(error(`${at}.url`, url.error));
    else if (url?.kind === 'tcp' && !faulty('modules.service.allow_tcp') && !service.allow_tcp) {
      problems.push(error(`${at}.url`, 'http(s) URLs need modules.service.allow_tcp: true; prefer a unix socket'));
    }
    if (cap.token_file !== undefined && !cap.token_file.startsWith('/'))
      problems.push(error(`${at}.token_file`, 'must be an absolute path'));
    if (publishedKnown && !faulty(`${at}.id`) && !published.has(cap.id) && !RESERVED_IDS.has(cap.id)) {
      problems.push(warning(`${at}.id`, `"${cap.id}" is not offered: it is not in inbound.public_capabilities`));
    }
  });
  return problems;
}

function checkOther(config: Config, faulty: Faulty): Problem[] {
  const problems: Problem[] = [];
  if (!isHttpUrl(config.hub)) problems.push(error('hub', 'must be an http(s) URL such as http://127.0.0.1:8710'));
  const agent = config.modules.agent;
  if (agent && !faulty('modules.agent.url')) {
    const url = parseServiceUrl(agent.url);
    if ('error' in url || url.kind !== 'unix') problems.push(error('modules.agent.url', 'must be a unix:///path/to/socket URL'));
  }
  if (!isLoopbackListen(config.local.a2a)) {
    problems.push(error('local.a2a', 'must be a loopback address (127.0.0.1:PORT, [::1]:PORT) or unix:///path'));
  }
  return problems;
}

function isHttpUrl(text: string): boolean {
  try {
    return ['http:', 'https:'].includes(new URL(text).protocol);
  } catch {
    return false;
  }
}

export function isLoopbackListen(text: string): boolean {
  if (text.startsWith('unix:///')) return true;
  const m = /^(127\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})|\[::1\]|localhost):(\d{1,5})$/.exec(text);
  if (!m || Number(m[5]) > 65535) return false;
  return [m[2], m[3], m[4]].every((octet) => octet === undefined || Number(octet) <= 255);
}
