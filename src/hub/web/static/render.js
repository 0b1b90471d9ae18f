// What the page shows: search results, an agent (its card, its KEL, the in-page verdict), the hub's health.
// Only public data: the public card has no price (PROTOCOL §3.1), and of extensions' params only the
// anet-card stamp is shown, so a price put on a card some other way is never displayed either.
import { fromBase64, hex, toBase64url } from './codec.js';
import { CARD_CODES, EXT_CARD, EXT_X402 } from './codes.js';
import { el, pairs, text, when } from './dom.js';
import { parseStrict } from './json.js';
import { checkKel } from './verify.js';

export const agentHref = (aid) => `#/agent/${encodeURIComponent(aid)}`;

function parsed(cardText) {
  try {
    const card = parseStrict(cardText);
    return card && typeof card === 'object' && !Array.isArray(card) ? card : null;
  } catch {
    return null;
  }
}

const list = (v) => (Array.isArray(v) ? v : []);

/** One search hit: name, description, skill ids, and whether its card and KEL check out here. */
export function resultItem(agent) {
  const card = parsed(agent.card) ?? {};
  const skills = list(card.skills).map((s) => el('code', { class: 'skill-id' }, text(s?.id)));
  const kel = agent.kel ? checkKel(fromBase64(agent.kel)) : null;
  const kelNote =
    kel === null || kel.error
      ? el('span', { class: 'bad' }, 'KEL invalid')
      : el('span', { class: 'muted' }, `KEL ${kel.events.length} event(s)`);
  return el(
    'li',
    { class: 'result', 'data-aid': agent.aid },
    el('a', { class: 'agent-link', href: agentHref(agent.aid) }, text(card.name ?? agent.name ?? agent.aid)),
    el('div', { class: 'aid' }, agent.aid),
    el('p', { class: 'description' }, text(card.description ?? '')),
    el('div', { class: 'skills-line' }, ...skills, ' ', kelNote),
  );
}

/** The verdict of the in-page check: "verified", or "invalid" with its code and sentence. */
export function verdictBox(result) {
  if (result.ok)
    return el(
      'div',
      { id: 'verdict-box', class: 'verdict ok' },
      el('strong', { id: 'verdict' }, 'verified'),
      el(
        'p',
        {},
        `Checked in this page: the KEL (${result.kel.events.length} event(s)) leads from its inception to this AID, each event signed by the key then current; the card's Ed25519 signature over its JCS payload verifies under key #${result.ksn}, the current one.`,
      ),
    );
  return el(
    'div',
    { id: 'verdict-box', class: 'verdict bad' },
    el('strong', { id: 'verdict' }, 'invalid'),
    ' ',
    el('code', { id: 'verdict-code' }, result.code),
    el('p', {}, CARD_CODES[result.code] ?? ''),
    el('p', { class: 'muted', id: 'verdict-detail' }, result.detail),
  );
}

function charge(card) {
  const x402 = list(card.capabilities?.extensions).find((e) => e?.uri === EXT_X402);
  if (!x402) return 'free';
  return x402.required === true ? 'paid' : 'some skills paid';
}

function skillItem(s) {
  return el(
    'li',
    { class: 'skill' },
    el('code', { class: 'skill-id' }, text(s?.id)),
    ' ',
    el('span', { class: 'skill-name' }, text(s?.name)),
    el('p', { class: 'skill-description' }, text(s?.description)),
    el('div', { class: 'tags' }, ...list(s?.tags).map((t) => el('span', { class: 'tag' }, text(t)))),
    list(s?.examples).length ? el('div', { class: 'muted' }, `examples: ${list(s.examples).map(text).join(' · ')}`) : null,
    list(s?.inputModes).length || list(s?.outputModes).length
      ? el(
          'div',
          { class: 'muted' },
          `in: ${list(s.inputModes).map(text).join(', ') || 'default'}; out: ${list(s.outputModes).map(text).join(', ') || 'default'}`,
        )
      : null,
  );
}

function extensionItem(e) {
  const stamp = e?.uri === EXT_CARD && e.params && typeof e.params === 'object' ? e.params : null;
  return el(
    'li',
    { class: 'extension' },
    el('code', {}, text(e?.uri)),
    e?.required === true ? el('span', { class: 'tag' }, 'required') : null,
    el('p', {}, text(e?.description ?? '')),
    stamp
      ? pairs([
          ['seq', text(stamp.seq)],
          ['issued', when(stamp.issuedAt) ?? text(stamp.issuedAt)],
          ['not before', when(stamp.notBefore) ?? text(stamp.notBefore)],
        ])
      : null,
  );
}

function interfaceItem(i) {
  return el(
    'li',
    { class: 'interface' },
    pairs([
      ['url', text(i?.url)],
      ['binding', text(i?.protocolBinding)],
      ['version', text(i?.protocolVersion)],
      ['tenant', text(i?.tenant)],
    ]),
  );
}

/** The card as received, rendered field by field (all of it as text). */
export function cardView(cardText) {
  const card = parsed(cardText);
  if (!card) return el('section', { class: 'card' }, el('p', { class: 'bad' }, 'The card is not a JSON object:'), el('pre', {}, cardText));
  const caps = card.capabilities && typeof card.capabilities === 'object' ? card.capabilities : {};
  return el(
    'section',
    { class: 'card' },
    el('h2', { id: 'card-name' }, text(card.name)),
    el('p', { id: 'card-description' }, text(card.description)),
    pairs([
      ['charge', charge(card)],
      ['version', text(card.version)],
      ['streaming', text(caps.streaming ?? false)],
      ['push notifications', text(caps.pushNotifications ?? false)],
      ['extended card', text(caps.extendedAgentCard ?? false)],
    ]),
    el('h3', {}, 'Skills'),
    el('ul', { id: 'skills' }, ...list(card.skills).map(skillItem)),
    el('h3', {}, 'Extensions'),
    el('ul', { id: 'extensions' }, ...list(caps.extensions).map(extensionItem)),
    el('h3', {}, 'Interfaces'),
    el('ul', { id: 'interfaces' }, ...list(card.supportedInterfaces).map(interfaceItem)),
    el('details', {}, el('summary', {}, 'The card as served'), el('pre', { id: 'card-text' }, cardText)),
  );
}

/** The KEL, event by event; a rotation names the key it replaces. */
export function kelView(kel) {
  if (kel === null)
    return el('section', { class: 'kel' }, el('h3', {}, 'Key event log'), el('p', { class: 'bad' }, 'The hub served no KEL.'));
  if (kel.error)
    return el(
      'section',
      { class: 'kel' },
      el('h3', {}, 'Key event log'),
      el('p', { class: 'bad', id: 'kel-error' }, `invalid: ${kel.error.code} — ${kel.error.message}`),
    );
  const rows = kel.events.map((e) =>
    el(
      'tr',
      { class: `kel-event ${e.type}` },
      el('td', {}, String(e.seq)),
      el('td', {}, e.type === 'icp' ? 'inception' : `rotation: key #${e.seq} replaces #${e.seq - 1}`),
      el('td', {}, el('code', { title: hex(e.key) }, `${toBase64url(e.key).slice(0, 16)}…`)),
      el('td', {}, el('code', { title: hex(e.nextDigest) }, `${hex(e.nextDigest).slice(0, 12)}…`)),
      el('td', {}, when(e.ts) ?? 'not recorded'),
      el('td', {}, el('code', { class: 'event-id' }, e.id)),
    ),
  );
  return el(
    'section',
    { class: 'kel' },
    el('h3', {}, 'Key event log'),
    el('p', { class: 'muted' }, `${kel.events.length} event(s); current key #${kel.ksn}; AID = the inception's CID, checked here.`),
    el(
      'table',
      { id: 'kel' },
      el('thead', {}, el('tr', {}, ...['seq', 'event', 'key', 'next key digest', 'when', 'event id'].map((h) => el('th', {}, h)))),
      el('tbody', {}, ...rows),
    ),
  );
}

/** `/health` and, when the hub has it, a few totals from `/metrics`. */
export function healthView(health, metrics) {
  const relay = health?.relay ?? {};
  return el(
    'div',
    { class: 'health' },
    el('span', { class: health?.ok ? 'ok' : 'bad', id: 'health-state' }, health?.ok ? 'hub up' : 'hub unreachable'),
    el('span', { class: 'muted' }, ` ${text(health?.aid ?? '')}`),
    pairs(
      Object.entries(relay).map(([k, v]) => [`relay ${k}`, text(v)]),
      { class: 'counters', id: 'relay-counters' },
    ),
    metrics.length
      ? pairs(
          metrics.map(([k, v]) => [k, v]),
          { class: 'counters', id: 'metrics' },
        )
      : null,
  );
}
