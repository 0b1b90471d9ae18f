// SPEC §11 hub storage on PostgreSQL (issue 19): agent reads asked at once share statements (AgentReads in
// src/hub/storage/postgres.ts). Each reader still gets its own answer: the agent it asked for or none,
// duplicates and absent AIDs included, and a read asked after a write ended sees that write.
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
