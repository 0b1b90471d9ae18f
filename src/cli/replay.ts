// `anet replay [--actor ID] [--from SEQ] [--to SEQ] [--verify]` (SPEC §14).
import { Store } from '../../store/db.js';
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
  const store = await Store.open(dataDir, { create: false });
  try {
    if (args.verify) return await report(io, store, args);
    await replay(store, filter, (step) => {
      const { entry } = step;
      if (args.json) {
        io.out(JSON.stringify({ seq: entry.seq, actor: entry.actor, kind: entry.kind, event: entry.event, from: step.before, to: step.after }, jsonReplacer));
      } else {
        io.out(`#${entry.seq} ${new Date(entry.event.at).toISOString()} ${entry.actor} ${entry.event.type}: ${show(step.before)} -> ${show(step.after)}`);
      }
    });
  } finally {
    await store.close();
  }
}

async function report(io: Io, store: Store, args: ReplayArgs): Promise<void> {
  const result = await verify(store, args.actor);
  if (args.json) printJson(io, result);
  else {
    for (const d of result.differences) io.out(`differs: ${d.actor} at #${d.seq}: ${d.problem}`);
    io.out(`${result.differences.length === 0 ? 'ok' : 'FAILED'}: ${result.checked} of ${result.snapshots} snapshots rebuilt from ${result.events} events, ${result.differences.length} difference(s)`);
  }
  if (result.differences.length > 0) throw new CliError('', 1);
}

