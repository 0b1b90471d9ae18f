// The layer check (docs/ARCHITECTURE.md, "Layers"): `npm run check:layers`, also run by `npm test`.
// Each layer may import from the layers below it only; no module may sit in an import circle. The hub
// is an application of its own beside the node: it builds on the wire, store and runtime layers, and
// the node never imports it (the `anet hub …` alias loads it through its one entry, src/hub/main.ts).
/** Lowest first. A module in one of these paths may import only from its own layer or a lower one. */
const LAYERS = [
  ['util', '^src/util/'],
  ['wire and crypto', '^src/(identity|protocol)/'],
  ['store and runtime', '^(store|machines)/|^src/(runtime|bus|actors)/'],
  ['protocol parts', '^src/(config|service|card|reader|relay|contacts|hub-client)/'],
  ['roles', '^src/node/(provider|caller)/'],
  ['application', '^src/node/[^/]+$'],
  ['surfaces', '^src/(cli|mcp|a2a|daemon|doctor)/'],
];

const upward = LAYERS.flatMap(([name, path], i) => {
  const higher = LAYERS.slice(i + 1);
  if (higher.length === 0) return [];
  return [{
    name: `layer: ${name} imports upward`,
    comment: `${name} may import only from ${LAYERS.slice(0, i + 1).map(([n]) => n).join(', ')} (docs/ARCHITECTURE.md, Layers)`,
    severity: 'error',
    from: { path },
    to: { path: higher.map(([, p]) => `(${p})`).join('|') },
  }];
});

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'an import circle makes two modules one: break it by moving what both need a layer down',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'protocol imports only identity',
      comment: 'src/protocol/ is the wire: types, limits, framing, formats and their signatures; it builds on identity (and util) alone',
      severity: 'error',
      from: { path: '^src/protocol/' },
      to: { path: '^(src|store|machines)/', pathNot: '^src/(protocol|identity|util)/' },
    },
    {
      name: 'machines are pure',
      comment: 'machines/ holds xstate machines without I/O: they import nothing of ours but each other',
      severity: 'error',
      from: { path: '^machines/' },
      to: { path: '^(src|store)/' },
    },
    {
      name: 'the node never imports the hub',
      comment: 'the hub is its own application (bin anet-hub); node code reaches it over HTTP through src/hub-client/, and `anet hub …` only through src/hub/main.ts',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/hub/|^src/cli/(hub|demo|replay)\\.ts$' },
      to: { path: '^src/hub/' },
    },
    {
      name: 'the anet hub alias loads only the hub entry',
      comment: '`anet hub …`, the demo and `anet replay` of a hub directory reach the hub through src/hub/main.ts alone',
      severity: 'error',
      from: { path: '^src/cli/(hub|demo|replay)\\.ts$' },
      to: { path: '^src/hub/', pathNot: '^src/hub/main\\.ts$' },
    },
    {
      name: 'the hub builds on the lower layers only',
      comment: 'the hub may use util, wire and crypto, store and runtime, never the node\'s parts, roles, application or surfaces',
      severity: 'error',
      from: { path: '^src/hub/' },
      to: { path: '^src/', pathNot: '^src/(hub|util|identity|protocol|runtime|bus)/' },
    },
    {
      name: 'surfaces do not share code',
      comment: 'a surface reaches the node through the table of operations (src/node/operations.ts); one surface may only start another, through its entry module',
      severity: 'error',
      from: { path: '^src/(cli|mcp|a2a|daemon|doctor)/' },
      to: {
        path: '^src/(cli|mcp|a2a|daemon|doctor)/',
        pathNot: ['^src/$1/', '^src/(daemon/daemon|mcp/server|doctor/doctor|a2a/server)\\.ts$'],
      },
    },
    {
      name: 'the roles do not import each other',
      comment: 'the provider and the caller meet only in the layers below them (src/protocol/ for the wire they share)',
      severity: 'error',
      from: { path: '^src/node/(provider|caller)/' },
      to: { path: '^src/node/(provider|caller)/', pathNot: '^src/node/$1/' },
    },
    {
      name: 'every module is in a layer',
      comment: 'a new folder under src/ goes into LAYERS (or is the hub), so the layer rules see it',
      severity: 'error',
      from: { path: '^src/', pathNot: [...LAYERS.map(([, p]) => p), '^src/hub/'] },
      to: {},
    },
    ...upward,
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(dist|node_modules)/' },
    tsConfig: { fileName: 'tsconfig.json' },
    tsPreCompilationDeps: true,
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
