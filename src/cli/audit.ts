// `anet audit cards [AID]` and `anet audit prices AID` (SPEC §14): what was signed, by whom, and when.
import { run } from '../node/open.js';
import { printJson, usageError, type Io } from './output.js';
import { isAid } from '../identity/cid.js';
import type { PriceAudit } from '../node/operations.js';

const when = (ms: number | null) => (ms === null ? '-' : new Date(ms).toISOString().replace('T', ' ').slice(0, 19));
const short = (digest: string) => digest.slice(0, 12);

export async function cmdAudit(io: Io, dataDir: string, what: string | undefined, aid: string | undefined, json: boolean): Promise<void> {
  if (aid !== undefined && !isAid(aid)) throw usageError(`"${aid}" is not a full AID (bafyrei...)`);
  if (what === 'cards') {
    const rows = await run(dataDir, 'audit-cards', aid ? { aid } : {});
    if (json) return printJson(io, rows);
    if (rows.length === 0) return io.out('no cards published or seen yet');
    for (const r of rows) {
      io.out(`${r.aid} seq ${r.seq} ${r.kind} issued ${when(r.issuedAt)} obtained ${when(r.obtainedAt)} from ${r.source}: ${r.check}`);
      const priced = (skill: string) => r.prices?.find((p) => p.skillId === skill);
      io.out(
        `  digest ${short(r.digest)}  skills ${r.skills.map((s) => (priced(s) ? `${s} (${priced(s)!.amount})` : s)).join(', ') || '-'}`,
      );
    }
    return;
  }
  if (what === 'prices') {
    if (!aid) throw usageError("audit prices needs the provider's full AID");
    const audit = await run(dataDir, 'audit-prices', { aid });
    if (json) return printJson(io, audit);
    printPrices(io, audit);
    return;
  }
  throw usageError('the audit commands are `anet audit cards [AID]` and `anet audit prices AID`');
}

function printPrices(io: Io, a: PriceAudit): void {
  if (a.skills.length === 0) io.out(`no signed prices from ${a.aid} yet (its extended card was never fetched)`);
  for (const s of a.skills) {
    io.out(s.skillId);
    for (const v of s.versions)
      io.out(`  ${v.amount} credits  card seq ${v.seq} digest ${short(v.digest)}  obtained ${when(v.obtainedAt)}`);
  }
  if (a.payments.length === 0) {
    io.out(`no payments to ${a.aid}`);
    return;
  }
  io.out(`payments to ${a.aid}`);
  for (const p of a.payments) {
    const under = p.price
      ? `checked against ${p.price.amount} credits signed in card seq ${p.price.seq} digest ${short(p.price.digest)}`
      : 'no signed price checked';
    io.out(
      `  ${when(p.at)}  task ${p.task}  ${p.skillId}  ${p.amount} credits  ${p.auto ? 'auto' : 'by the operator'}  ${p.status}${p.hubTx ? `  hub ${p.hubTx}` : ''}  ${under}`,
    );
  }
}
