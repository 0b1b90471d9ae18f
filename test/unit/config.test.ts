// SPEC §2: config.json parsing, defaults, unknown keys with did-you-mean, JSON paths, cross-field rules.
import test from 'ava';
import { parseConfig, validateConfig } from '../../src/config/load.js';
import { offeredCapabilities } from '../../src/config/check.js';
import type { Problem } from '../../src/config/problem.js';

const lines = (problems: Problem[]) => problems.map((p) => `${p.severity} ${p.path}: ${p.message}`);
const errorsAt = (problems: Problem[]) => problems.filter((p) => p.severity === 'error').map((p) => p.path);

const svc = (id: string, extra: object = {}) => ({ id, url: `unix:///run/anet/${id}.sock`, ...extra });

test('SPEC §2.1–2.3: an empty config gets every documented default', (t) => {
  const { config, problems } = validateConfig({});
  t.deepEqual(problems, []);
  t.is(config!.hub, 'http://127.0.0.1:8710');
  t.deepEqual(config!.inbound, {
    policy: 'closed',
    allow_file: 'peers.allow',
    trust_file: 'peers.trust',
    deny_file: 'peers.deny',
    public_capabilities: [],
  });
  t.is(config!.modules.service.timeout_ms, 120000);
  t.false(config!.modules.service.allow_tcp);
  t.false(config!.modules.preview.enabled);
  t.is(config!.payments.auto_max, 100n);
  t.is(config!.payments.daily_max, 1000n);
  t.is(config!.local.a2a, '127.0.0.1:41811');
});

test('SPEC §2.1: public capability defaults', (t) => {
  const { config } = validateConfig({
    inbound: { public_capabilities: [{ id: 'a.b', files: { media_types: ['image/*'] } }] },
    modules: { service: { capabilities: [svc('a.b')] } },
  });
  t.like(config!.inbound.public_capabilities[0], {
    per_caller_per_min: 60,
    per_caller_per_day: 2000,
    global_per_min: 1200,
    max_inflight: 16,
    per_caller_inflight: 1,
    max_args_bytes: 4096,
    allow_only: false,
    discard: false,
    files: { max_count: 1, max_bytes: 8388608, media_types: ['image/*'] },
  });
  t.deepEqual(
    offeredCapabilities(config!).map((c) => c.id),
    ['a.b'],
  );
});

test('SPEC §2.2: unknown keys are errors at their JSON path, with a did-you-mean hint', (t) => {
  const { problems } = parseConfig(`{
    "inbound": { "public_capabilities": [ { "id": "x" }, { "id": "y", "per_caler_per_min": 5 } ] },
    "modules": { "servce": {} },
    "hubb": "http://x"
  }`);
  // The rest of the file is still checked: without "service", nothing serves x and y.
  t.deepEqual(lines(problems), [
    'error hubb: unknown key (did you mean "hub"?)',
    'warning inbound.public_capabilities[0].id: "x" is not offered: no modules.service.capabilities entry serves it',
    'warning inbound.public_capabilities[1].id: "y" is not offered: no modules.service.capabilities entry serves it',
    'error inbound.public_capabilities[1].per_caler_per_min: unknown key (did you mean "per_caller_per_min"?)',
    'error modules.servce: unknown key (did you mean "service"?)',
  ]);
});

test('SPEC §2: comments are allowed; bad JSON and duplicate keys are refused with a line', (t) => {
  t.deepEqual(parseConfig('// top\n{ /* policy */ "inbound": { "policy": "open" } }').problems, []);
  const broken = parseConfig('{\n  "hub": "http://x",\n  "inbound": {,\n}');
  t.is(broken.problems.length, 1);
  t.regex(broken.problems[0]!.message, /not valid JSON: .*\(line 3\)/);
  const dup = parseConfig('{ "hub": "http://a", "hub": "http://b" }');
  t.regex(dup.problems[0]!.message, /Duplicate key 'hub'/);
});

test('SPEC §2.2: prices are exact integers from 0 to 2^63−1', (t) => {
  const withPrice = (price: string) =>
    parseConfig(`{ "modules": { "service": { "capabilities": [ { "id": "p", "url": "unix:///s.sock", "price": ${price} } ] } } }`);
  t.is(withPrice('9223372036854775807').config!.modules.service.capabilities[0]!.price, 9223372036854775807n);
  t.is(withPrice('0').config!.modules.service.capabilities[0]!.price, 0n);
  for (const bad of ['9223372036854775808', '-1', '3.5', '"3"']) {
    const { problems } = withPrice(bad);
    t.deepEqual(errorsAt(problems), ['modules.service.capabilities[0].price'], `price ${bad}`);
  }
});

test('SPEC §2.1: per_caller_inflight above max_inflight is an error', (t) => {
  const { problems } = validateConfig({
    inbound: { public_capabilities: [{ id: 'c', max_inflight: 2, per_caller_inflight: 3 }] },
    modules: { service: { capabilities: [svc('c')] } },
  });
  t.deepEqual(lines(problems), ['error inbound.public_capabilities[0].per_caller_inflight: 3 exceeds max_inflight 2']);
});

test('SPEC §2: a capability in only one of the two lists is not offered, and reported', (t) => {
  const { config, problems } = validateConfig({
    inbound: { public_capabilities: [{ id: 'only.public' }, { id: 'both' }] },
    modules: { service: { capabilities: [svc('both'), svc('only.service')] } },
  });
  t.deepEqual(lines(problems), [
    'warning inbound.public_capabilities[0].id: "only.public" is not offered: no modules.service.capabilities entry serves it',
    'warning modules.service.capabilities[1].id: "only.service" is not offered: it is not in inbound.public_capabilities',
  ]);
  t.deepEqual(
    offeredCapabilities(config!).map((c) => c.id),
    ['both'],
  );
});

test('SPEC §2.1: bad files limits, and files on a capability no service serves', (t) => {
  const { problems } = validateConfig({
    inbound: {
      public_capabilities: [
        { id: 'f1', files: { max_count: 9, media_types: ['image/png'] } },
        { id: 'f2', files: { max_bytes: 67108865, media_types: [] } },
        { id: 'f3', files: {} },
        { id: 'f4', files: { media_types: ['png'] } },
      ],
    },
  });
  // Bad limits do not hide that no service serves these capabilities (each declares files).
  t.deepEqual(errorsAt(problems), [
    'inbound.public_capabilities[0].files',
    'inbound.public_capabilities[0].files.max_count',
    'inbound.public_capabilities[1].files',
    'inbound.public_capabilities[1].files.max_bytes',
    'inbound.public_capabilities[1].files.media_types',
    'inbound.public_capabilities[2].files',
    'inbound.public_capabilities[2].files.media_types',
    'inbound.public_capabilities[3].files',
    'inbound.public_capabilities[3].files.media_types[0]',
  ]);
  const unserved = validateConfig({ inbound: { public_capabilities: [{ id: 'f', files: { media_types: ['image/png'] } }] } });
  t.deepEqual(lines(unserved.problems), [
    'error inbound.public_capabilities[0].files: "f" accepts files but no modules.service.capabilities entry serves it',
  ]);
});

test('SPEC §2.2: http URLs need allow_tcp; other schemes and relative sockets are refused', (t) => {
  const caps = [svc('a', { url: 'http://127.0.0.1:9000/run' }), svc('b', { url: 'ftp://x' }), svc('c', { url: 'unix://relative.sock' })];
  const both = [{ id: 'a' }, { id: 'b' }, { id: 'c' }];
  const refused = validateConfig({ inbound: { public_capabilities: both }, modules: { service: { capabilities: caps } } });
  t.deepEqual(errorsAt(refused.problems), [
    'modules.service.capabilities[0].url',
    'modules.service.capabilities[1].url',
    'modules.service.capabilities[2].url',
  ]);
  t.regex(refused.problems[0]!.message, /allow_tcp/);
  const allowed = validateConfig({
    inbound: { public_capabilities: [{ id: 'a' }] },
    modules: { service: { allow_tcp: true, capabilities: [caps[0]] } },
  });
  t.deepEqual(allowed.problems, []);
});

test('SPEC §2.1: duplicate and reserved ids, and ids that break the pattern, in one run', (t) => {
  const { problems } = validateConfig({
    inbound: { public_capabilities: [{ id: 'dup' }, { id: 'dup' }, { id: 'chat' }, { id: 'Bad Id' }] },
    modules: { service: { capabilities: [svc('dup'), svc('dup'), svc('chat')] } },
  });
  t.deepEqual(errorsAt(problems), [
    'inbound.public_capabilities[1].id',
    'inbound.public_capabilities[2].id',
    'inbound.public_capabilities[3].id',
    'modules.service.capabilities[1].id',
    'modules.service.capabilities[2].id',
  ]);
  t.regex(problems[0]!.message, /duplicate id "dup"/);
  t.regex(problems[1]!.message, /reserved/);
  t.regex(problems[2]!.message, /must match/);
});

test('SPEC §2.3: local.a2a must be loopback; token_file must be absolute', (t) => {
  const { problems } = validateConfig({
    local: { a2a: '0.0.0.0:41811' },
    modules: { service: { token_file: 'token.txt' } },
  });
  t.deepEqual(errorsAt(problems).sort(), ['local.a2a', 'modules.service.token_file']);
  t.deepEqual(validateConfig({ local: { a2a: '[::1]:5000' } }).problems, []);
});

test('SPEC §2.2: timeouts beyond what a timer holds, imprecise prices and bad loopback addresses are refused', (t) => {
  t.deepEqual(errorsAt(validateConfig({ local: { a2a: '127.999.1.1:80' } }).problems), ['local.a2a']);
  const { problems } = parseConfig(`{
    "modules": { "service": { "timeout_ms": 2147483648, "capabilities": [
      { "id": "a", "url": "unix:///a.sock", "price": 9007199254740993.0, "timeout_ms": 3000000000 } ] } } }`);
  t.deepEqual(errorsAt(problems), [
    'modules.service.capabilities[0].price',
    'modules.service.capabilities[0].timeout_ms',
    'modules.service.timeout_ms',
  ]);
});

test('SPEC §2: a schema error does not hide the cross-field problems of the same file', (t) => {
  const { config, problems } = parseConfig(`{
    "inbound": { "public_capabilities": [
      { "id": "echo", "max_inflight": 1, "per_caller_inflight": 2, "per_caler_per_day": 5 },
      { "id": "only.public" } ] },
    "modules": { "service": { "capabilities": [
      { "id": "echo", "url": "unix:///run/anet/echo.sock", "price": 1.5 },
      { "id": "web", "url": "http://127.0.0.1:9000/run" } ] } }
  }`);
  t.is(config, undefined, 'the node still refuses the file');
  t.deepEqual(lines(problems), [
    'error inbound.public_capabilities[0].per_caler_per_day: unknown key (did you mean "per_caller_per_day"?)',
    'error inbound.public_capabilities[0].per_caller_inflight: 2 exceeds max_inflight 1',
    'warning inbound.public_capabilities[1].id: "only.public" is not offered: no modules.service.capabilities entry serves it',
    'error modules.service.capabilities[0].price: must be an integer number of credits, written without a decimal point or exponent',
    'warning modules.service.capabilities[1].id: "web" is not offered: it is not in inbound.public_capabilities',
    'error modules.service.capabilities[1].url: http(s) URLs need modules.service.allow_tcp: true; prefer a unix socket',
  ]);
});

test('SPEC §2: a value the schema refused is not judged by other rules; the rest of its entry is', (t) => {
  const { problems } = validateConfig({
    inbound: {
      public_capabilities: [
        { id: 'a', max_inflight: 'x', per_caller_inflight: 20 }, // not "20 exceeds max_inflight 16" (the default)
        'b', // not an entry: the entries after it keep their index
        { id: 'c', max_inflight: 2, per_caller_inflight: 3 },
        { id: 'd' }, // served by an entry whose url is missing: not "not offered"
      ],
    },
    modules: {
      service: {
        allow_tcp: 'yes', // refused, so the http URL below is not judged against allow_tcp's default
        capabilities: [
          svc('a', { url: 'http://127.0.0.1:9000/a' }),
          svc('c'),
          { id: 'd' },
          { id: 'Bad Id', url: 'ftp://x', price: -1 }, // a bad id and price: its url is still checked
        ],
      },
    },
  });
  t.deepEqual(lines(problems), [
    'error inbound.public_capabilities[0].max_inflight: must be an integer ≥ 1',
    'error inbound.public_capabilities[1]: Invalid input: expected object, received string',
    'error inbound.public_capabilities[2].per_caller_inflight: 3 exceeds max_inflight 2',
    'error modules.service.allow_tcp: Invalid input: expected boolean, received string',
    'error modules.service.capabilities[2].url: url is required: unix:///path/to/socket',
    'error modules.service.capabilities[3].id: must match ^[a-z0-9][a-z0-9._-]{0,63}$ (lower case, digits, . _ -)',
    'error modules.service.capabilities[3].price: must be between 0 and 9223372036854775807',
    'error modules.service.capabilities[3].url: use unix:///path/to/socket (or http(s):// with modules.service.allow_tcp)',
  ]);
});

test('SPEC §2: a list the schema refused as a whole serves nothing doctor can judge; a file that is not an object is one problem', (t) => {
  const notAList = validateConfig({
    inbound: { public_capabilities: [{ id: 'a', max_inflight: 1, per_caller_inflight: 2 }] },
    modules: { service: { capabilities: { id: 'a' } } },
  });
  t.deepEqual(lines(notAList.problems), [
    'error inbound.public_capabilities[0].per_caller_inflight: 2 exceeds max_inflight 1',
    'error modules.service.capabilities: Invalid input: expected array, received object',
  ]);
  const publicNotAList = validateConfig({ inbound: { public_capabilities: {} }, modules: { service: { capabilities: [svc('a')] } } });
  t.deepEqual(lines(publicNotAList.problems), ['error inbound.public_capabilities: Invalid input: expected array, received object']);
  t.deepEqual(lines(parseConfig('[1, 2]').problems), ['error : Invalid input: expected object, received array']);
});
