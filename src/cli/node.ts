// CLI commands that need the node: each runs an operation of the node's table (src/node/operations.ts)
// through the running daemon's control socket, else in-process (`run`, src/node/open.ts).
import { metricsAddress, startDaemon } from '../daemon/daemon.js';
import { readProfile, writeProfile } from '../card/publish.js';
import { run } from '../node/open.js';
import { cardData, type CardView } from '../node/operations.js';
import { CliError, printJson, usageError, untilSignal, type Io } from './output.js';
import { isAid } from '../identity/cid.js';
import { createLogger, isLogLevel, logLevel, logTo } from '../util/log.js';

/**
 * `anet daemon`: its log lines on stderr through pino (src/util/log.ts), JSON unless stderr is a terminal;
 * `ready` and `stopped` stay on stdout, as a command's own output.
 */
export async function cmdDaemon(io: Io, dataDir: string, flags: { metrics?: string; logLevel?: string } = {}): Promise<void> {
  const level = logLevel(flags.logLevel);
  if (!isLogLevel(level)) throw usageError(level);
  const where = flags.metrics === undefined ? null : metricsAddress(flags.metrics);
  if (typeof where === 'string') throw new CliError(where, 2);
  const logger = createLogger({ name: 'anet daemon', level, write: (line) => io.err(line), readable: process.stderr.isTTY === true });
  // Listened for before starting: a stop asked while the daemon starts (systemd's, say) stops it cleanly once started.
  const signaled = untilSignal();
  const daemon = await startDaemon(dataDir, logTo(logger), flags.metrics === undefined ? {} : { metrics: flags.metrics });
  io.out(`anet daemon: ready; ${daemon.node.identity.aid} on ${daemon.node.config.hub} (control socket ${dataDir}/control.sock)`);
  await signaled;
  await daemon.close();
  io.out('anet daemon: stopped');
}

export async function cmdProfileSet(
  io: Io,
  dataDir: string,
  name: string | undefined,
  description: string | undefined,
  json: boolean,
): Promise<void> {
  if (name === undefined && description === undefined) throw usageError('profile set needs --name and/or --description');
  const profile = {
    ...(await readProfile(dataDir)),
    ...(name !== undefined ? { name } : {}),
    ...(description !== undefined ? { description } : {}),
  };
  await writeProfile(dataDir, profile);
  const r = await run(dataDir, 'publish', {});
  if (json) return printJson(io, { profile, ...r });
  io.out(
    r.outcome === 'published'
      ? `profile saved; card seq ${r.own.seq} published`
      : 'profile saved; no capability is offered, so no card is published',
  );
}

export async function cmdFind(
  io: Io,
  dataDir: string,
  words: string[],
  opts: { skill?: string; tag?: string; limit?: string },
  json: boolean,
): Promise<void> {
  const limit = opts.limit === undefined ? undefined : Number(opts.limit);
  if (limit !== undefined && !(Number.isInteger(limit) && limit >= 1 && limit <= 100)) {
    throw usageError(`--limit must be a whole number from 1 to 100, not "${opts.limit}"`);
  }
  const args = { q: words.join(' '), skill: opts.skill, tag: opts.tag, limit };
  const rows = await run(dataDir, 'find', args);
  if (json) return printJson(io, rows);
  if (rows.length === 0) return io.out('no agents found');
  const table = [['name', 'charge', 'key', 'skills', 'AID'], ...rows.map((r) => [r.name, r.charge, r.key, r.skills.join(', '), r.aid])];
  const widths = table[0]!.map((_, i) => Math.max(...table.map((row) => row[i]!.length)));
  for (const row of table) io.out(row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  '));
}

export async function cmdCard(io: Io, dataDir: string, aid: string | undefined, json: boolean): Promise<void> {
  if (!aid) throw usageError('card needs the full AID, as `anet find` prints it');
  if (!isAid(aid)) throw usageError(`"${aid}" is not a full AID (bafyrei...)`);
  const view = await run(dataDir, 'card', { aid });
  if (json) return printJson(io, cardData(view));
  const status = view.verified ? `verified, key ${view.key}` : `NOT verified: ${view.reason}, key ${view.key}`;
  io.out(`${view.name} ${view.aid} (${status}) ${view.charge}`);
  const width = Math.max(0, ...view.skills.map((s) => s.length));
  for (const skill of view.skills) io.out(view.prices ? `${skill.padEnd(width)}  ${priceOf(view, skill)}` : skill);
  io.out(view.explanation);
  if (!view.verified) throw new CliError('', 1);
}

function priceOf(view: CardView, skill: string): string {
  const p = view.prices?.find((x) => x.skillId === skill);
  return p ? `${p.amount} credits` : 'free';
}
