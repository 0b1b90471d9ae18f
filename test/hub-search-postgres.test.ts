// SPEC §11 (ranked directory search), issue 19 (search at 100k agents on PostgreSQL): the ways the PostgreSQL
// backend reads a page (src/hub/search/postgres.ts) — prefixes expanded by the vocabulary of migration 3 or
// left as prefixes while it is filled, each score's part walked in AID order or read through the GIN index,
// with and without table statistics — must give the embedded index's pages, query for query and page for
// page. The storage is opened as a hub opens it (migrations, triggers, the vocabulary filled at start).
import test, { type ExecutionContext } from 'ava';
import postgres, { type Sql } from 'postgres';
import { DirectoryIndex } from '../src/hub/search/index.js';
import { searchVector } from '../src/hub/search/postgres.js';
import { MIGRATIONS } from '../src/hub/storage/migrations.js';
import { openPostgresStorage } from '../src/hub/storage/postgres.js';
import type { AgentRecord, HubStorage, SearchPage, SearchQuery } from '../src/hub/storage/types.js';
import { postgresUrl, usePostgres } from './helpers/postgres.js';

usePostgres(test);

type Search = (q: SearchQuery) => Promise<SearchPage>;

/** An AID that sorts by `i` (code-unit order), 44 characters as real AIDs. */
const aidOf = (i: number) => `E${String(i).padStart(6, '0')}${'x'.repeat(37)}`;

function record(i: number, name: string, description: string, skills: { id: string; name: string; tags: string[] }[] = []): AgentRecord {
  const card = { name, description, skills: skills.map((s) => ({ ...s, description: '' })) };
  return { aid: aidOf(i), name, kel: new Uint8Array([i & 255]), card: JSON.stringify(card), seq: '1', digest: 'd', updatedAt: 1 };
}

const FILLER = 'fast reliable service handles documents images audio video reports data tables charts'.split(' ');

/**
 * 1,200 agents: `rarely` in the descriptions of every 40th (30, fewer than a page of 21 in a walk of
 * 500), in the name of every 300th (4) and a tag of every 150th; `often` in every 3rd description, in the
 * skill id of every 100th; the early AIDs mention `harbor` in descriptions only, the late ones in names.
 */
function fixture(): AgentRecord[] {
  const out: AgentRecord[] = [];
  for (let i = 0; i < 1200; i++) {
    const words = Array.from({ length: 12 }, (_, k) => FILLER[(i * 7 + k * 3) % FILLER.length]!);
    if (i % 40 === 5) words.push('rarely');
    if (i % 3 === 1) words.push('often');
    if (i < 30) words.push('harbor');
    const name = i % 300 === 299 ? `rarely-${i}` : i >= 1170 ? `harbor-${i}` : `agent-${i}`;
    const skills = [{ id: i % 100 === 50 ? 'often.run' : `skill${i % 9}`, name: 'skill', tags: i % 150 === 75 ? ['rarely'] : ['misc'] }];
    out.push(record(i, name, words.join(' '), skills));
  }
  return out;
}

function embedded(records: AgentRecord[]): Search {
  const index = new DirectoryIndex();
  const store = new Map(records.map((r) => [r.aid, r]));
  for (const rec of records) index.set(rec);
  return (q) => index.search(q, async (aid) => store.get(aid));
}

async function opened(t: ExecutionContext, url: string, progress?: string[]): Promise<HubStorage> {
  const storage = await openPostgresStorage(url, progress ? { progress: (line) => progress.push(line) } : {});
  t.teardown(() => storage.close());
  return storage;
}

async function admin(t: ExecutionContext, url: string): Promise<Sql> {
  const sql = postgres(url, { onnotice: () => {} });
  t.teardown(() => sql.end());
  return sql;
}

const query = (q: Partial<SearchQuery>): SearchQuery => ({ words: [], skill: null, tag: null, cursor: null, limit: 20, ...q });

/** Every page of a search by `limit`: the AIDs in the order visited. */
async function pages(search: Search, q: Partial<SearchQuery>, limit: number): Promise<string[]> {
  const seen: string[] = [];
  let cursor: string | null = null;
  for (let n = 0; n < 500; n++) {
    const page: SearchPage = await search(query({ ...q, limit, cursor }));
    seen.push(...page.agents.map((a) => a.aid));
    if (page.next === null) return seen;
    cursor = page.next;
  }
  throw new Error('the pages never end');
}

const QUERIES: Partial<SearchQuery>[] = [
  { words: ['rarely'] },
  { words: ['rare'] },
  { words: ['often'] },
  { words: ['oft'] },
  { words: ['harbor'] },
  { words: ['often', 'rarely'] },
  { words: ['rarely', 'fast'] },
  { words: ['often', 'harb'] },
  { words: ['rarely'], tag: 'rarely' },
  { words: ['often', 'data', 'fast'] },
];

async function sameAsEmbedded(t: ExecutionContext, pg: Search, want: Search, note: string): Promise<void> {
  for (const q of QUERIES)
    for (const limit of [3, 20])
      t.deepEqual(await pages(pg, q, limit), await pages(want, q, limit), `${note}: ${JSON.stringify(q)} by ${limit}`);
}

test('SPEC §11, issue 19 (PostgreSQL search): a word in names of late AIDs and descriptions of early ones: names first, across pages of 1 and of 7', async (t) => {
  const records = fixture();
  const storage = await opened(t, await postgresUrl(t));
  for (const rec of records) await storage.agents.put(rec);
  const search: Search = (q) => storage.agents.search(q);
  const visited = await pages(search, { words: ['harbor'] }, 1);
  const names = records.filter((r) => r.name.startsWith('harbor')).map((r) => r.aid);
  const descriptions = records.slice(0, 30).map((r) => r.aid);
  t.deepEqual(visited, [...names, ...descriptions], 'the 30 late names (score 4) before the 30 early descriptions (1), each in AID order');
  t.deepEqual(await pages(search, { words: ['harbor'] }, 7), visited);
});

test('SPEC §11, issue 19 (PostgreSQL search): pages as the embedded index gives them, without table statistics (walks) and with (GIN or walks)', async (t) => {
  const records = fixture();
  const url = await postgresUrl(t);
  const storage = await opened(t, url);
  for (const rec of records) await storage.agents.put(rec);
  const sql = await admin(t, url);
  const want = embedded(records);
  // A second pool, so its statistics are read afresh: first before any ANALYZE, then after one.
  const fresh = async (): Promise<Search> => {
    const other = await opened(t, url);
    return (q) => other.agents.search(q);
  };
  const before = await sql`select 1 from pg_stats where tablename = 'agents' and attname = 'search'`;
  if (before.length === 0) await sameAsEmbedded(t, await fresh(), want, 'no statistics');
  await sql`analyze agents`;
  await sameAsEmbedded(t, await fresh(), want, 'statistics');
});

test('issue 19, migration 3: a version-1 database gets its vocabulary at start, with progress, and searches by prefix until then', async (t) => {
  const records = fixture().slice(0, 900);
  const url = await postgresUrl(t);
  const sql = await admin(t, url);
  // The database as a hub of schema version 1 left it.
  await sql.begin(async (tx) => {
    await tx`create table schema_migrations (version integer primary key, name text not null, applied_at bigint not null)`;
    await tx.unsafe(MIGRATIONS.find((m) => m.version === 1)!.sql);
    await tx`insert into schema_migrations values (1, 'v1', 0)`;
  });
  for (const rec of records) {
    await sql`insert into agents (aid, name, kel, card, seq, digest, keys, updated_at, search)
      values (${rec.aid}, ${rec.name}, ${Buffer.from(rec.kel)}, ${rec.card}, ${rec.seq}, ${rec.digest}, null, 1, ${searchVector(sql, rec)})`;
  }
  // Migrated, the vocabulary not filled yet (as while a replica fills it): searches take the prefixes.
  for (const m of MIGRATIONS.filter((x) => x.version > 1).sort((a, b) => a.version - b.version)) {
    await sql.begin(async (tx) => {
      await tx.unsafe(m.sql);
      await tx`insert into schema_migrations values (${m.version}, ${m.name}, 0)`;
    });
  }
  const late = record(5000, 'latecomer', 'published while the vocabulary was filled: harbor rarely');
  const all = [...records, late];
  // A hub that started fills the vocabulary: the state before that, with its `meta` row back.
  const filling = await opened(t, url, []);
  await sql`insert into meta (key, value) values ('search_words_backfill', '') on conflict do nothing`;
  await sql`delete from search_words`;
  await filling.agents.put(late);
  await sameAsEmbedded(t, (q) => filling.agents.search(q), embedded(all), 'vocabulary being filled');
  // The next start fills it, saying how far it got; then the words are expanded by it.
  const progress: string[] = [];
  const storage = await opened(t, url, progress);
  t.deepEqual(progress, ['directory vocabulary: 901 of 901 agents read', 'directory vocabulary complete (901 agents read)']);
  const words = await sql<{ word: string }[]>`select word from search_words where word in ('harbor', 'rarely', 'latecom', 'latecomer')`;
  t.deepEqual(words.map((w) => w.word).sort(), ['harbor', 'latecom', 'latecomer', 'rarely']);
  t.is((await sql`select 1 from meta where key = 'search_words_backfill'`).length, 0);
  await sameAsEmbedded(t, (q) => storage.agents.search(q), embedded(all), 'vocabulary complete');
});

test('issue 19, migration 3: a card published or rewritten adds its words to the vocabulary (trigger), and a search finds it by prefix', async (t) => {
  const url = await postgresUrl(t);
  const storage = await opened(t, url);
  const sql = await admin(t, url);
  await storage.agents.put(record(1, 'first', 'ordinary words'));
  await storage.agents.put(record(1, 'first', 'now about zeppelins'));
  await storage.agents.update(aidOf(2), () => record(2, 'second', 'quixotic'));
  const words = await sql<{ word: string }[]>`select word from search_words where word like 'zeppelin%' or word like 'quixot%'`;
  t.deepEqual(words.map((w) => w.word).sort(), ['quixot', 'quixotic', 'zeppelin', 'zeppelins']);
  t.deepEqual(
    (await storage.agents.search(query({ words: ['zepp'] }))).agents.map((a) => a.aid),
    [aidOf(1)],
  );
  t.deepEqual(
    (await storage.agents.search(query({ words: ['quix'] }))).agents.map((a) => a.aid),
    [aidOf(2)],
  );
});

test('SPEC §11, issue 19 (PostgreSQL search): cards published while the pages are read: every agent there from the start is visited once, none twice', async (t) => {
  const records = fixture();
  const storage = await opened(t, await postgresUrl(t));
  for (const rec of records) await storage.agents.put(rec);
  const before = records.filter((r) => JSON.parse(r.card!).description.includes('often') || r.card!.includes('often.run'));
  let publishing = true;
  // New agents mentioning `often` in names (scoring above every page read so far) and descriptions.
  const writer = (async () => {
    for (let i = 0; publishing && i < 400; i++)
      await storage.agents.put(record(2000 + i, i % 2 ? `often-${i}` : `new-${i}`, 'often and fast'));
  })();
  const visited = await pages((q) => storage.agents.search(q), { words: ['often'] }, 7);
  publishing = false;
  await writer;
  t.is(new Set(visited).size, visited.length, 'no agent twice');
  const seen = new Set(visited);
  t.deepEqual(
    before.filter((r) => !seen.has(r.aid)).map((r) => r.aid),
    [],
  );
});
