// `anet replay [--actor ID] [--from SEQ] [--to SEQ] [--verify]` (SPEC §14). On a hub's data dir,
// `--verify` checks the ledger's history (every account's seqs and hash chain: `anet-hub verify`, run
// through the hub's entry, src/hub/main.ts, which is loaded only then).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Store } from '../../store/db.js';
import { cmdHubVerify } from './hub.js';
import { replay, verify } from '../runtime/replay.js';
import { CliError, printJson, usageError, jsonReplacer, type Io } from './output.js';

export interface ReplayArgs {
  actor?: string;
  from?: string;
  to?: string;
  verify: boolean;
  json: boolean;
}

function seqArg(name: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (!/^[1-9][0-9]*$/.test(text)) throw usageError(`--${name} takes a journal sequence number (1, 2, ...)`);
  return Number(text);
}

const show = (value: unknown) => (typeof value === 'string' ? value : JSON.stringify(value));

export async function cmdReplay(io: Io, dataDir: string, args: ReplayArgs): Promise<void> {
  const filter = { actor: args.actor, from: seqArg('from', args.from), to: seqArg('to', args.to) };
  if (!existsSync(Store.path(dataDir)) && existsSync(join(dataDir, 'hub-store'))) return verifyHub(io, dataDir, args);
  const store = await Store.open(dataDir, { create: false });
  try {
    if (args.verify) return await report(io, store, args);
    await replay(store, filter, (step) => {
      const { entry } = step;
      if (args.json) {
        io.out(
          JSON.stringify(
            { seq: entry.seq, actor: entry.actor, kind: entry.kind, event: entry.event, from: step.before, to: step.after },
            jsonReplacer,
          ),
        );
      } else {
        io.out(
          `#${entry.seq} ${new Date(entry.event.at).toISOString()} ${entry.actor} ${entry.event.type}: ${show(step.before)} -> ${show(step.after)}`,
        );
      }
    });
  } finally {
    await store.close();
  }
}

async function report(io: Io, store: Store, args: ReplayArgs): Promise<void> {
  const result = await verify(store, args.actor);
  const failed = result.differences.length > 0 || result.damage !== null;
  if (args.json) printJson(io, result);
  else {
    // The journal's own damage first: a rebuilt state past it is not the node's history.
    if (result.damage)
      io.out(
        `damaged: the journal from #${result.damage.seq}: ${result.damage.problem}; restore ${store.dataDir} from a backup made before the damage`,
      );
    for (const d of result.differences) io.out(`differs: ${d.actor} at #${d.seq}: ${d.problem}`);
    const damage = result.damage ? `; the journal is damaged from #${result.damage.seq}` : '';
    io.out(
      `${failed ? 'FAILED' : 'ok'}: ${result.checked} of ${result.snapshots} snapshots rebuilt from ${result.events} events, ${result.differences.length} difference(s)${damage}`,
    );
  }
  if (failed) throw new CliError('', 1);
}

/** `anet replay --verify` on a hub's data dir: every entry of the ledger's history. */
async function verifyHub(io: Io, dataDir: string, args: ReplayArgs): Promise<void> {
  if (!args.verify || args.actor !== undefined || args.from !== undefined || args.to !== undefined) {
    throw usageError(
      `${dataDir} is a hub's data dir: \`anet replay --verify --data ${dataDir}\` checks its ledger (there is no journal to replay)`,
    );
  }
  return cmdHubVerify(io, dataDir, args.json);
}
