// SPEC §11 hub storage on PostgreSQL (issue 19): agent reads asked at once share statements (AgentReads in
// src/hub/storage/postgres.ts). Each reader still gets its own answer: the agent it asked for or none,
// duplicates and absent AIDs included, one that fails fails alone, and a read asked after a write ended sees it.
import test from 'ava';
import { openPostgresStorage } from '../src/hub/storage/postgres.js';
import type { AgentRecord } from '../src/hub/storage/types.js';
import { postgresUrl, usePostgres } from './helpers/postgres.js';

usePostgres(test);

const agent = (aid: string, name = `agent ${aid}`): AgentRecord => ({
  aid,
  name,
  kel: new Uint8Array([0xa1, aid.length, 7]),
  card: null,
  seq: null,
  digest: null,
  updatedAt: 1_700_000_000_000,
});

test('[postgres] SPEC §11 hub storage: 300 agent reads at once, some the same AID, some absent, each answered its own', async (t) => {
  const s = await openPostgresStorage(await postgresUrl(t));
  t.teardown(() => s.close());
  for (let i = 0; i < 50; i++) await s.agents.put(agent(`aid-${i}`));
  const asked = Array.from({ length: 300 }, (_, i) => `aid-${(i * 7) % 80}`);
  const got = await Promise.all(asked.map((aid) => s.agents.get(aid)));
  got.forEach((rec, i) => {
    const n = Number(asked[i]!.slice(4));
    if (n >= 50) t.is(rec, undefined, asked[i]);
    else t.deepEqual({ ...rec!, kel: [...rec!.kel] }, { ...agent(asked[i]!), kel: [...agent(asked[i]!).kel] }, asked[i]);
  });
  t.not(got[0], got[asked.indexOf(asked[0]!, 1)], 'a record of its own for each reader');
  // An AID PostgreSQL cannot take fails its own read, not those asked with it (the first two reads go
  // alone, the four after them wait and go together).
  const mixed = await Promise.allSettled(['aid-3', 'aid-4', 'aid-1', 'bad\u0000aid', 'aid-2', 'aid-99'].map((aid) => s.agents.get(aid)));
  t.deepEqual(
    mixed.map((r) => (r.status === 'fulfilled' ? (r.value?.aid ?? 'none') : 'failed')),
    ['aid-3', 'aid-4', 'aid-1', 'failed', 'aid-2', 'none'],
  );
  // Reads queued behind others, each after a write that ended: every one sees its write.
  const seen = await Promise.all(
    Array.from({ length: 20 }, async (_, i) => {
      await s.agents.put(agent(`aid-${i}`, `renamed ${i}`));
      return (await s.agents.get(`aid-${i}`))?.name;
    }),
  );
  t.deepEqual(
    seen,
    Array.from({ length: 20 }, (_, i) => `renamed ${i}`),
  );
});
