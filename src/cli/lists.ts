// `anet allow|trust|deny add|rm|ls [AID]` (SPEC §12). The files are read on every decision: no restart.
import { readConfig } from '../config/load.js';
import { listPath, readList, editList, type ListName } from '../contacts/lists.js';
import { isAid } from '../identity/cid.js';
import { CliError, printJson, usageError, type Io } from './output.js';

export async function cmdList(
  io: Io,
  dataDir: string,
  list: ListName,
  op: string | undefined,
  aid: string | undefined,
  json: boolean,
): Promise<void> {
  const { config } = await readConfig(dataDir);
  if (!config) throw new CliError('config.json has errors; run `anet doctor`');
  const path = listPath(dataDir, config, list);
  if (op === 'ls') {
    const file = await readList(path);
    if (file.error) throw new CliError(file.error);
    const aids = [...file.aids];
    if (json) return printJson(io, { list, path, aids });
    if (aids.length === 0) return io.out(`the ${list} list is empty (${path})`);
    for (const a of aids) io.out(a);
    return;
  }
  if (op !== 'add' && op !== 'rm') throw usageError(`the ${list} commands are \`anet ${list} add|rm AID\` and \`anet ${list} ls\``);
  if (!aid || !isAid(aid)) throw usageError(`${list} ${op} needs a full AID (bafyrei...)`);
  const changed = await editList(path, op, aid);
  if (json) return printJson(io, { list, op, aid, changed });
  io.out(
    changed
      ? `${op === 'add' ? 'added to' : 'removed from'} the ${list} list: ${aid}`
      : `${aid} was ${op === 'add' ? 'already' : 'not'} on the ${list} list`,
  );
}
