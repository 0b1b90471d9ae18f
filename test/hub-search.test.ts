// SPEC §11 (the hub's directory: search by words, skill id and tag), issue 19 (a ranked, indexed directory):
// one fixture of 1,000 agents, run against both backends' search — the embedded index
// (src/hub/search/index.ts) and PostgreSQL (src/hub/search/postgres.ts, on a real throwaway server) — which
// must give the very same pages: the agent named "translator" first for `translate` among 500 that mention
// the word, prefixes, all words matching, exact filters, paging without repeats or skips, withdrawn cards
// gone, malformed cursors refused.
import test, { type ExecutionContext } from 'ava';
import postgres, { type Sql } from 'postgres';
import { BadCursor, BadSearch, encodeCursor } from '../src/hub/search/fields.js';
import { DirectoryIndex } from '../src/hub/search/index.js';
import { searchAgents, searchVector } from '../src/hub/search/postgres.js';
import type { AgentRecord, SearchPage, SearchQuery } from '../src/hub/storage/types.js';
import { postgresUrl, usePostgres } from './helpers/postgres.js';

usePostgres(test);

// ---- The fixture ----

/** A deterministic generator, so every run (and both backends) see the same agents. */
function random(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return s / 2147483648;
  };
}

const FILLER_WORDS = (
  'fast reliable service handles documents images audio video summaries reports data tables charts ' +
  'questions answers research weather travel finance legal medical support billing scheduling transport'
).split(' ');
const SKILLS = ['summarize', 'ocr', 'weather-forecast', 'code_review', 'imageCaption'];
const TAGS = ['text', 'vision', 'audio', 'german', 'french'];

/** AIDs with upper and lower case, `-` and `_`: the order must be code-unit order on both backends. */
function aidOf(i: number, rnd: () => number): string {
  const bytes = Buffer.alloc(32);
  for (let k = 0; k < 32; k++) bytes[k] = Math.floor(rnd() * 256);
  bytes.writeUInt16BE(i, 30);
  return `E${bytes.toString('base64url').slice(0, 43)}`;
}

function prose(rnd: () => number, n: number): string {
  return Array.from({ length: n }, () => FILLER_WORDS[Math.floor(rnd() * FILLER_WORDS.length)]).join(' ');
}

interface Fixture {
  records: AgentRecord[];
  translator: string;
  /** The 20 that mention `translate` in a description and carry the tag `translation` (weight B). */
  tagged: string[];
  /** The 480 that mention it in descriptions only (weight C). */
  mentioning: string[];
  /** Agents with the tag `german`, and those of them that mention `translate`. */
  german: string[];
  germanTranslate: string[];
  bySkill: Map<string, string[]>;
}

function record(aid: string, name: string, card: object): AgentRecord {
  return {
    aid,
    name,
    kel: new Uint8Array([1, 2, 3, aid.charCodeAt(1)]),
    card: JSON.stringify(card),
    seq: '1',
    digest: 'd',
    updatedAt: 1_700_000_000_000,
  };
}

function skill(id: string, name: string, description: string, tags: string[]) {
  return { id, name, description, tags };
}

function buildFixture(): Fixture {
  const rnd = random(19);
  const f: Fixture = { records: [], translator: '', tagged: [], mentioning: [], german: [], germanTranslate: [], bySkill: new Map() };
  for (let i = 0; i < 1000; i++) {
    const aid = aidOf(i, rnd);
    const tags = [TAGS[i % TAGS.length]!];
    const id = SKILLS[Math.floor(i / 5) % SKILLS.length]!;
    let description = prose(rnd, 60);
    let name = `agent ${i}`;
    if (i === 999) {
      // The one agent named for the word, its description silent about it; its AID sorts after most.
      name = 'translator';
      description = 'Turns text from one language into another.';
    } else if (i < 500) {
      // A long description that says the word several times, as an agent trying to rank would.
      description = `${prose(rnd, 40)} we translate and translate again, translations of all kinds ${prose(rnd, 40)} translate`;
      if (i < 20) tags.push('translation');
    }
    f.records.push(record(aid, name, { name: `Card ${i}`, description, skills: [skill(id, `Skill ${i}`, prose(rnd, 12), tags)] }));
    if (i === 999) f.translator = aid;
    else if (i < 20) f.tagged.push(aid);
    else if (i < 500) f.mentioning.push(aid);
    if (tags.includes('german')) {
      f.german.push(aid);
      if (i < 500) f.germanTranslate.push(aid);
    }
    f.bySkill.set(id, [...(f.bySkill.get(id) ?? []), aid]);
  }
  return f;
}

const fixture = buildFixture();
const byAid = (xs: string[]) => [...xs].sort();

// ---- The two backends, behind one shape ----

interface Backend {
  search(q: Partial<SearchQuery>): Promise<SearchPage>;
  set(rec: AgentRecord): Promise<void>;
}

const query = (q: Partial<SearchQuery>): SearchQuery => ({ words: [], skill: null, tag: null, limit: 20, cursor: null, ...q });

function embedded(records: AgentRecord[]): Backend {
  const index = new DirectoryIndex();
  const store = new Map<string, AgentRecord>();
  for (const rec of records) {
    store.set(rec.aid, rec);
    index.set(rec);
  }
  return {
    search: (q) => index.search(query(q), async (aid) => store.get(aid)),
    set: async (rec) => {
      store.set(rec.aid, rec);
      index.set(rec);
    },
  };
}

/** The hub's `agents` table, as src/hub/storage/migrations.ts makes it (with the storage search/postgres.ts asks for). */
async function createAgents(sql: Sql): Promise<void> {
  await sql`
    create table agents (
      aid text collate "C" primary key, name text not null, kel bytea not null, card text, seq text, digest text,
      keys bytea, updated_at bigint not null, search tsvector)`;
  await sql`create index agents_search on agents using gin (search)`;
  await sql`alter table agents alter column search set storage main`;
}

function upsert(sql: Sql, rec: AgentRecord) {
  return sql`
    insert into agents (aid, name, kel, card, seq, digest, keys, updated_at, search)
    values (${rec.aid}, ${rec.name}, ${Buffer.from(rec.kel)}, ${rec.card}, ${rec.seq}, ${rec.digest},
            ${rec.keys ? Buffer.from(rec.keys) : null}, ${rec.updatedAt}, ${searchVector(sql, rec)})
    on conflict (aid) do update set card = excluded.card, search = excluded.search, updated_at = excluded.updated_at`;
}

async function onPostgres(t: ExecutionContext, records: AgentRecord[]): Promise<Backend> {
  const sql = postgres(await postgresUrl(t), { onnotice: () => {}, max: 4 });
  t.teardown(() => sql.end());
  await createAgents(sql);
  await sql.begin((tx) => records.map((rec) => upsert(tx as unknown as Sql, rec)));
  return {
    search: (q) => searchAgents(sql, query(q)),
    set: async (rec) => {
      await upsert(sql, rec);
    },
  };
}

const BACKENDS = {
  embedded: async (_t: ExecutionContext, records: AgentRecord[]) => embedded(records),
  postgres: onPostgres,
};

/** Every page of a search, with `limit`: the AIDs in the order visited. */
async function all(b: Backend, q: Partial<SearchQuery>, limit: number): Promise<string[]> {
  const seen: string[] = [];
  let cursor: string | null = null;
  for (let pages = 0; pages < 1000; pages++) {
    const page: SearchPage = await b.search({ ...q, limit, cursor });
    if (page.agents.length > limit) throw new Error('a page longer than its limit');
    seen.push(...page.agents.map((a) => a.aid));
    if (page.next === null) return seen;
    cursor = page.next;
  }
  throw new Error('the pages never end');
}

// ---- The tests, once per backend ----

for (const [kind, open] of Object.entries(BACKENDS)) {
  test(`SPEC §11 ranked search (${kind}): the agent named "translator" is first for "translate" among 500 that mention it`, async (t) => {
    const b = await open(t, fixture.records);
    t.not(byAid([fixture.translator, ...fixture.tagged, ...fixture.mentioning])[0], fixture.translator, 'AID order would not put it first');
    const page = await b.search({ words: ['translate'], limit: 5 });
    t.is(page.agents[0]?.aid, fixture.translator);
    t.is(page.agents[0]?.name, 'translator');
    t.is(page.agents.length, 5);
    t.truthy(page.next);
  });

  test(`SPEC §11 ranked search (${kind}): prefixes match ("transl", "translati"), in the same order`, async (t) => {
    const b = await open(t, fixture.records);
    const [transl] = (await b.search({ words: ['transl'], limit: 1 })).agents;
    t.is(transl?.aid, fixture.translator);
    // "translati" stems to no prefix of "translat": the words as written still find "translations".
    const found = await all(b, { words: ['translati'] }, 100);
    t.deepEqual(byAid(found), byAid([...fixture.tagged, ...fixture.mentioning]));
  });

  test(`SPEC §11 ranked search (${kind}): paging by 7 visits every match once, name > tag > description, ties by AID`, async (t) => {
    const b = await open(t, fixture.records);
    const visited = await all(b, { words: ['TRANSLATE'] }, 7);
    t.is(new Set(visited).size, visited.length, 'no agent twice');
    // The whole order is known: the name (weight A), then the tag "translation" (B), then descriptions (C).
    t.deepEqual(visited, [fixture.translator, ...byAid(fixture.tagged), ...byAid(fixture.mentioning)]);
  });

  test(`SPEC §11 ranked search (${kind}): all words must match`, async (t) => {
    const b = await open(t, fixture.records);
    const both = await all(b, { words: ['translate', 'German'] }, 100);
    t.deepEqual(byAid(both), byAid(fixture.germanTranslate));
    t.deepEqual(await all(b, { words: ['translate', 'nosuchword'] }, 100), []);
    t.deepEqual(await all(b, { words: ['translate', '!!!'] }, 100), [], 'a word with no letter or digit matches nothing');
  });

  test(`SPEC §11 ranked search (${kind}): skill and tag filters are exact, with and without words`, async (t) => {
    const b = await open(t, fixture.records);
    t.deepEqual(await all(b, { tag: 'german' }, 50), byAid(fixture.german), 'a tag alone: AID order');
    t.deepEqual(await all(b, { skill: 'code_review' }, 50), byAid(fixture.bySkill.get('code_review')!));
    t.deepEqual(await all(b, { skill: 'code' }, 50), [], 'a skill id is matched whole');
    t.deepEqual(await all(b, { tag: 'German' }, 50), [], 'a tag is matched exactly');
    const withWords = await all(b, { words: ['translate'], skill: 'imageCaption', tag: 'german' }, 50);
    const expected = fixture.germanTranslate.filter((aid) => fixture.bySkill.get('imageCaption')!.includes(aid));
    t.true(expected.length > 0);
    t.deepEqual(byAid(withWords), byAid(expected));
  });

  test(`SPEC §11 ranked search (${kind}): a search without words lists every card in AID order`, async (t) => {
    const b = await open(t, fixture.records);
    const listed = await all(b, {}, 100);
    t.deepEqual(listed, byAid(fixture.records.map((r) => r.aid)));
  });

  test(`SPEC §11 ranked search (${kind}): records come back whole`, async (t) => {
    const b = await open(t, fixture.records);
    const [got] = (await b.search({ words: ['translator'] })).agents;
    const want = fixture.records.find((r) => r.aid === fixture.translator)!;
    t.deepEqual(got, want);
    t.true(got!.kel instanceof Uint8Array);
  });

  test(`SPEC §11 ranked search (${kind}): a withdrawn card vanishes, a new one appears`, async (t) => {
    const b = await open(t, fixture.records);
    const translator = fixture.records.find((r) => r.aid === fixture.translator)!;
    await b.set({ ...translator, card: null });
    const after = await all(b, { words: ['translate'] }, 100);
    t.false(after.includes(fixture.translator));
    t.is(after.length, 500);
    // An unparsable card is not listed either.
    await b.set({ ...translator, card: '{not json' });
    t.false((await all(b, {}, 100)).includes(fixture.translator));
    await b.set(translator);
    t.is((await b.search({ words: ['translate'], limit: 1 })).agents[0]?.aid, fixture.translator);
  });

  test(`SPEC §11 ranked search (${kind}): a malformed cursor is refused`, async (t) => {
    const b = await open(t, fixture.records);
    for (const cursor of ['', 'not a cursor!', fixture.translator, Buffer.from('x:').toString('base64url')]) {
      await t.throwsAsync(b.search({ words: ['translate'], cursor }), { instanceOf: BadCursor }, cursor);
      await t.throwsAsync(b.search({ cursor }), { instanceOf: BadCursor }, cursor);
    }
    const words = Array.from({ length: 17 }, (_, i) => `w${i}`);
    await t.throwsAsync(b.search({ words }), { instanceOf: BadSearch });
  });
}

test('SPEC §11 ranked search: both backends give the same pages for the same queries', async (t) => {
  const [e, p] = [embedded(fixture.records), await onPostgres(t, fixture.records)];
  const queries: Partial<SearchQuery>[] = [
    { words: ['data'] },
    { words: ['re'] },
    { words: ['skill', '3'] },
    { words: ['summarize'] },
    { words: ['weather', 'forecast'] },
    { words: ['image'] },
    { words: ['card'], tag: 'vision' },
    { words: ['t'] },
    { words: ['card', 'skill', 'data'] },
    { words: ['translate', 'again', 'agent'] },
    { words: ['transl', 'kinds', 'we', 'card'], tag: 'translation' },
  ];
  for (const q of queries) t.deepEqual(await all(p, q, 37), await all(e, q, 37), JSON.stringify(q));
  // A cursor of another query, below every score of this one: nothing follows it, on either.
  const low = { words: ['translate'], cursor: encodeCursor({ score: 0, aid: 'E' }) };
  t.deepEqual((await p.search(low)).agents, []);
  t.deepEqual((await e.search(low)).agents, []);
});

test('SPEC §11 ranked search (embedded): cards rewritten many times leave the index exact', async (t) => {
  const b = embedded(fixture.records);
  // Every agent rewritten three times: the postings of old versions pile up and are compacted away.
  for (let round = 0; round < 3; round++) {
    for (const rec of fixture.records) await b.set({ ...rec, updatedAt: rec.updatedAt + round + 1 });
  }
  t.deepEqual(await all(b, { words: ['translate'] }, 50), [fixture.translator, ...byAid(fixture.tagged), ...byAid(fixture.mentioning)]);
  // The translator renamed: it leaves the name part, and its old words no longer find it.
  const translator = fixture.records.find((r) => r.aid === fixture.translator)!;
  await b.set({ ...translator, name: 'cook', card: JSON.stringify({ name: 'Cook', description: 'recipes', skills: [] }) });
  t.false((await all(b, { words: ['translate'] }, 100)).includes(fixture.translator));
  t.deepEqual(await all(b, { words: ['recipes'] }, 10), [fixture.translator]);
});

test('SPEC §11 directory, embedded index: one agent republishing a large card of new words again and again does not grow the index without bound', (t) => {
  const index = new DirectoryIndex();
  for (let i = 0; i < 200; i++)
    index.set(record(`bafyreib${i.toString().padStart(6, '0')}`, `agent ${i}`, { name: `agent ${i}`, skills: [] }));
  const words = (round: number) => Array.from({ length: 2000 }, (_, i) => `w${round}x${i}`).join(' ');
  let most = 0;
  for (let round = 0; round < 300; round++) {
    index.set(record('bafyreizzzzzz', 'noisy', { name: 'noisy', description: words(round), skills: [] }));
    most = Math.max(most, index.held.postings);
  }
  // 300 versions of 2000 words each would be 600,000 postings kept; the live ones are ~2,400.
  t.true(most < 250_000, `at most ${most} postings held`);
  t.true(index.held.words < 150_000, `${index.held.words} words held`);
  t.is(index.size, 201);
});
