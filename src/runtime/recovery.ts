// What start-up reads (SPEC §14): the journal past the checkpoint, checked as it is read (store/chain.ts):
// seq continuity and the hash chain from the link that ends at the checkpoint to the last entry, and no
// link past the last entry. That is every event whose effect is not yet in a snapshot; what the
// checkpoint already holds is checked in full by `anet replay --verify`. Damage refuses the start
// (JournalDamagedError).
import { type Store, seqKey, lostChainStart, type JournalEntry } from '../../store/db.js';
import { decodeValue } from './journal-decode.js';
import { ChainCheck, JournalDamagedError, ZERO_HASH, type Anchor } from '../../store/chain.js';

/** The checkpoint seq: the journal up to it is in the snapshots. */
export async function checkpointOf(store: Store): Promise<number> {
  return ((await store.meta.get('checkpoint')) as number | undefined) ?? 0;
}

/** The entries after `checkpoint`, in seq order, a page at a time; throws JournalDamagedError on damage. */
export async function* journalPast(store: Store, checkpoint: number): AsyncGenerator<JournalEntry[]> {
  const check = await startCheck(store, checkpoint);
  const values = store.journal.values({ gt: seqKey(check.from - 1), valueEncoding: 'buffer', highWaterMarkBytes: 1 << 20 } as object);
  try {
    for (let page = (await values.nextv(1024)) as Buffer[]; page.length > 0; page = (await values.nextv(1024)) as Buffer[]) {
      await check.chain.prepare(page.length);
      const entries: JournalEntry[] = [];
      for (const bytes of page) {
        let entry: JournalEntry | undefined;
        try {
          entry = decodeValue(bytes) as JournalEntry;
        } catch {
          entry = undefined;
        }
        check.chain.entry(entry?.seq, bytes);
        if (check.chain.damage) throw new JournalDamagedError(store.dataDir, check.chain.damage);
        if (entry!.seq > checkpoint) entries.push(entry!);
      }
      if (entries.length > 0) yield entries;
    }
  } finally {
    await values.close();
  }
  const damage = await check.chain.end();
  if (damage) throw new JournalDamagedError(store.dataDir, damage);
}

/**
 * Where the start check begins: after the last link that ends at or before the checkpoint (a checkpoint
 * falls between batches, so that link ends at it), or at the chain's first entry when the checkpoint is
 * older (a journal written before the chain existed). Links missing at the anchor, or links without the
 * meta record of where the chain starts, are damage too.
 */
async function startCheck(store: Store, checkpoint: number): Promise<{ from: number; chain: ChainCheck }> {
  const chainFrom = store.chainStart;
  let anchor: Anchor = { to: checkpoint, h: ZERO_HASH };
  if (chainFrom === undefined) {
    const lost = await lostChainStart(store);
    if (lost) throw new JournalDamagedError(store.dataDir, lost);
  } else if (checkpoint >= chainFrom) {
    let found: Anchor | null = null;
    for await (const [key, v] of store.chain.iterator({ lte: seqKey(checkpoint), reverse: true, limit: 1 }))
      found = { to: Number(key), h: (v as { h: Uint8Array }).h };
    if (!found || found.to < chainFrom - 1)
      throw new JournalDamagedError(store.dataDir, {
        seq: chainFrom,
        problem: `the hash chain's links up to the checkpoint (#${checkpoint}) are lost`,
      });
    anchor = found;
  }
  return { from: anchor.to + 1, chain: new ChainCheck(anchor, chainFrom, store.links(anchor.to)) };
}
