// The page builds its DOM from elements and text nodes only: card text is the agent's to write, so it
// never reaches an HTML parser (and the Content-Security-Policy's Trusted Types refuse any that would).

/** `el('li', {class: 'x'}, 'text', child)`: attributes by setAttribute, strings as text nodes. */
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes))
    if (value !== undefined && value !== null && value !== false) node.setAttribute(name, String(value));
  for (const child of children.flat())
    if (child !== undefined && child !== null && child !== false) node.append(typeof child === 'string' ? child : child);
  return node;
}

/** Replaces a container's children. */
export function fill(container, ...children) {
  container.replaceChildren(...children.flat().filter((c) => c !== undefined && c !== null && c !== false));
}

/** A value shown as text whatever it is: strings as they are, anything else as compact JSON. */
export function text(value) {
  if (typeof value === 'string') return value;
  if (value === undefined) return '';
  try {
    return JSON.stringify(value);
  } catch {
    return String(value);
  }
}

/** A definition list of [label, value] rows, values being text or nodes. */
export function pairs(rows, attributes = {}) {
  return el(
    'dl',
    attributes,
    ...rows
      .filter(([, v]) => v !== undefined && v !== null)
      .flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, typeof v === 'string' ? v : v)]),
  );
}

/** Milliseconds since 1970 as an ISO time in UTC, or null for none. */
export function when(ms) {
  const n = typeof ms === 'string' ? Number(ms) : ms;
  if (!Number.isFinite(n) || n <= 0) return null;
  const d = new Date(n);
  return Number.isNaN(d.getTime())
    ? null
    : d
        .toISOString()
        .replace('T', ' ')
        .replace(/\.\d+Z$/, ' UTC');
}
