// The hub's web view (issue 22): search through the hub's own `GET /agents` (so the ranking is the one
// `anet find` shows), open an agent, check its KEL and card here, and show the hub's health and counters.
// Routes live in the URL's fragment: `#/search?q=…`, `#/agent/<AID>`.
import { el, fill } from './dom.js';
import { cardView, healthView, kelView, resultItem, verdictBox } from './render.js';
import { verifyCard, checkKel } from './verify.js';

const $ = (id) => document.getElementById(id);

async function getJson(path) {
  const res = await fetch(path, { cache: 'no-store' });
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
  return res.json();
}

async function showSearch(q) {
  $('q').value = q;
  $('agent').hidden = true;
  $('results').hidden = false;
  fill($('results'), el('p', { class: 'muted' }, 'Searching…'));
  const list = el('ol', { id: 'result-list' });
  fill($('results'), list);
  // Which search the list shows, once its first page is in (a test waits for it; a reader sees the list).
  $('results').dataset.q = q;
  delete $('results').dataset.done;
  await nextPage(list, q, null);
  if ($('results').dataset.q === q) $('results').dataset.done = 'true';
}

/** One page of results; a "More" button fetches the next with the hub's cursor. */
async function nextPage(list, q, cursor) {
  const params = new URLSearchParams({ limit: '20' });
  if (q) params.set('q', q);
  if (cursor) params.set('cursor', cursor);
  let page;
  try {
    page = await getJson(`/agents?${params}`);
  } catch (err) {
    return list.after(el('p', { class: 'bad' }, `Search failed: ${err.message}`));
  }
  list.append(...page.agents.map(resultItem));
  if (list.children.length === 0) list.after(el('p', { class: 'muted', id: 'no-results' }, 'No agent matches.'));
  if (page.next) {
    const more = el('button', { type: 'button', id: 'more' }, 'More');
    more.addEventListener('click', () => {
      more.remove();
      void nextPage(list, q, page.next);
    });
    list.after(more);
  }
}

async function fetchBytes(path) {
  const res = await fetch(path, { cache: 'no-store' });
  return res.ok ? new Uint8Array(await res.arrayBuffer()) : null;
}

async function fetchText(path) {
  const res = await fetch(path, { cache: 'no-store' });
  return res.ok ? res.text() : null;
}

async function showAgent(aid) {
  $('results').hidden = true;
  const view = $('agent');
  view.hidden = false;
  fill(view, el('p', { class: 'muted' }, 'Loading…'));
  const base = `/agents/${encodeURIComponent(aid)}`;
  const [cardText, kelBytes] = await Promise.all([fetchText(`${base}/card`), fetchBytes(`${base}/kel`)]);
  const back = el('a', { href: '#/search?q=', class: 'back' }, '← search');
  if (cardText === null) return fill(view, back, el('p', { class: 'bad' }, `The hub has no card for ${aid}.`), kelView(checkKel(kelBytes)));
  const result = verifyCard(cardText, kelBytes);
  fill(view, back, el('div', { class: 'aid', id: 'agent-aid' }, aid), verdictBox(result), cardView(cardText), kelView(result.kel));
}

/** A few totals from Prometheus text: counters and gauges of ours, their samples summed over labels. */
function metricTotals(textBody) {
  const types = new Map();
  const totals = new Map();
  for (const line of textBody.split('\n')) {
    const type = /^# TYPE (\S+) (counter|gauge)$/.exec(line);
    if (type) types.set(type[1], type[2]);
    const sample = /^([a-zA-Z_:][\w:]*?)(?:_total)?(?:\{[^}]*\})? (\S+)$/.exec(line);
    if (!sample || line.startsWith('#')) continue;
    const name = types.has(sample[1]) ? sample[1] : types.has(`${sample[1]}_total`) ? `${sample[1]}_total` : null;
    if (name && !/^(process|nodejs)_/.test(name)) totals.set(name, (totals.get(name) ?? 0) + Number(sample[2]));
  }
  return [...totals].slice(0, 12).map(([k, v]) => [k, String(v)]);
}

async function showHealth() {
  const health = await getJson('/health').catch(() => null);
  const metrics = await fetchText('/metrics')
    .then((t) => (t ? metricTotals(t) : []))
    .catch(() => []);
  fill($('health'), healthView(health, metrics));
}

function route() {
  const hash = location.hash.slice(1);
  const agent = /^\/agent\/([^/?#]+)$/.exec(hash);
  if (agent) return showAgent(decodeURIComponent(agent[1]));
  const q = hash.startsWith('/search?') ? (new URLSearchParams(hash.slice('/search?'.length)).get('q') ?? '') : '';
  return showSearch(q);
}

$('search-form').addEventListener('submit', (event) => {
  event.preventDefault();
  location.hash = `#/search?${new URLSearchParams({ q: $('q').value.trim() })}`;
});
window.addEventListener('hashchange', () => void route());
void showHealth();
void route();
