// The hub's commands (SPEC §11, §12): start, mint, invite, and the check of its ledger's history. The
// hub's one entry: `anet-hub` (src/hub/bin.ts) runs hubMain(); the node's `anet hub …`, `anet demo` and
// `anet replay --verify` of a hub's directory import this module when asked, and nothing else of the hub.
// It loads hub modules only (no node code), so a hub-only install needs none of the node's packages.
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { readFile } from 'node:fs/promises';
import { parseCommandLine } from '../util/args.js';
import { randomHex } from '../util/random.js';
import { ensureDir, isNotFound } from '../util/fsutil.js';
import { hasIdentity, loadIdentity } from '../identity/store.js';
import { isAid } from '../identity/cid.js';
import { isAmount } from '../protocol/authorization.js';
import type { MintAnswer } from '../protocol/hub-api.js';
import { StoreLockedError } from '../../store/db.js';
import { startHub, hubRunFile } from './server.js';
import { HubStore } from './store.js';
import { Ledger, LedgerRefused, LedgerDamagedError, checkLedger } from './ledger.js';
import { operatorPost, OperatorRequestError } from './operator.js';

export { startHub, type Hub, type HubOptions } from './server.js';

/** Where a command's lines go (the node CLI's Io has this shape). */
export interface HubIo {
  out(line: string): void;
  err(line: string): void;
}

/**
 * A command that failed: its one line (none when the command printed its own report), and the exit code of
 * SPEC §12 (1 refused or failed, 2 usage). A usage error's line gets the help hint of the command that ran
 * it (`anet help` or `anet-hub help`).
 */
export class HubCommandError extends Error {
  override name = 'HubCommandError';
  constructor(
    message: string,
    readonly exitCode: 1 | 2 = 1,
    readonly usage = false,
  ) {
    super(message);
  }
}

const usageError = (message: string) => new HubCommandError(message, 2, true);

/** JSON for data output, as the node CLI prints it: bigints as decimal strings, bytes as hex. */
const jsonReplacer = (_key: string, v: unknown) =>
  typeof v === 'bigint' ? v.toString() : v instanceof Uint8Array ? Buffer.from(v).toString('hex') : v;
const printJson = (io: HubIo, value: unknown) => io.out(JSON.stringify(value, jsonReplacer, 2));

/** Resolves on the first SIGINT or SIGTERM (the hub stops cleanly). */
function untilSignal(): Promise<void> {
  return new Promise((resolve) => {
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
}

const hubDir = (dataFlag: string | undefined) => (dataFlag ? resolve(dataFlag) : join(homedir(), '.anet-hub'));

export interface HubStartFlags {
  requireInvite?: boolean;
  /** New AIDs per address a minute (0: no limit). */
  registerLimit?: string;
  trustProxy?: boolean;
}

export async function cmdHubStart(
  io: HubIo,
  dataFlag: string | undefined,
  portFlag: string | undefined,
  flags: HubStartFlags = {},
): Promise<void> {
  const port = portFlag === undefined ? 8710 : Number(portFlag);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw usageError('--port takes a port number (0 picks a free one)');
  const limit = flags.registerLimit === undefined ? undefined : Number(flags.registerLimit);
  if (limit !== undefined && !(Number.isInteger(limit) && limit >= 0))
    throw usageError('--register-limit takes a whole number of new AIDs per address a minute (0: no limit)');
  const dataDir = hubDir(dataFlag);
  await ensureDir(dataDir, 0o700);
  const hub = await startHub({
    dataDir,
    port,
    requireInvite: flags.requireInvite ?? false,
    trustProxy: flags.trustProxy ?? false,
    ...(limit !== undefined ? { registrationsPerMinute: limit } : {}),
  });
  io.out(`anet hub: ready on ${hub.url}; hub AID ${hub.aid}; data ${dataDir}`);
  const admission = flags.requireInvite
    ? 'new AIDs need an invite (`anet hub invite`)'
    : limit === 0
      ? 'new AIDs are not limited'
      : `at most ${limit ?? 20} new AIDs per address a minute`;
  io.out(`anet hub: ${admission}${flags.trustProxy ? '; client addresses from X-Forwarded-For' : ''}`);
  await untilSignal();
  await hub.close();
  io.out('anet hub: stopped');
}

/** The running hub of a data dir, from its hub.json; null when there is none or its process is gone. */
async function runningHub(dataDir: string): Promise<{ url: string; pid: number } | null> {
  let run: { url?: unknown; pid?: unknown };
  try {
    run = JSON.parse(await readFile(hubRunFile(dataDir), 'utf8'));
  } catch (err) {
    if (isNotFound(err) || err instanceof SyntaxError) return null;
    throw err;
  }
  if (typeof run.url !== 'string' || typeof run.pid !== 'number') return null;
  try {
    process.kill(run.pid, 0);
  } catch (err) {
    // A hub killed without its clean stop leaves the file behind; EPERM means the process lives.
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return null;
  }
  return { url: run.url, pid: run.pid };
}

/** A request to the running hub; its refusal or absence is the command's one line. */
async function viaRunningHub<T>(request: () => Promise<T>): Promise<T> {
  try {
    return await request();
  } catch (err) {
    if (err instanceof OperatorRequestError) throw new HubCommandError(err.message);
    throw err;
  }
}

export async function cmdHubMint(
  io: HubIo,
  dataFlag: string | undefined,
  aid: string | undefined,
  amount: string | undefined,
  json: boolean,
): Promise<void> {
  if (!aid || !amount) throw usageError('hub mint needs an AID and an amount: `anet hub mint AID AMOUNT [--data HUBDIR]`');
  if (!isAid(aid)) throw usageError(`"${aid}" is not a full AID (bafyrei...)`);
  if (!isAmount(amount)) throw usageError(`"${amount}" is not an amount: a whole number of credits from 1 to 9223372036854775807`);
  const dataDir = hubDir(dataFlag);
  if (!(await hasIdentity(dataDir)))
    throw new HubCommandError(
      `no hub in ${dataDir}: start one with \`anet hub start --data ${dataDir}\`, or name its directory with --data`,
    );
  const identity = await loadIdentity(dataDir);
  const nonce = randomHex(16);
  const running = await runningHub(dataDir);
  let answer: MintAnswer;
  let via: string;
  if (running) {
    answer = await viaRunningHub(() => operatorPost<MintAnswer>(running.url, identity, '/ledger/mint', { aid, amount, nonce }));
    via = `through the running hub at ${running.url} (pid ${running.pid})`;
  } else {
    answer = await mintInStore(dataDir, identity.aid, aid, amount, nonce);
    via = `no hub is running on ${dataDir}: written to its store directly`;
  }
  if (json) return printJson(io, { ...answer, via: running ? 'hub' : 'store', ...(running ? { url: running.url } : {}) });
  io.out(`minted ${amount} credits to ${aid}; balance ${answer.balance}`);
  io.out(via);
}

/** `anet hub invite`: a single-use token that lets one new AID register (through the running hub, else its store). */
export async function cmdHubInvite(io: HubIo, dataFlag: string | undefined, json: boolean): Promise<void> {
  const dataDir = hubDir(dataFlag);
  if (!(await hasIdentity(dataDir)))
    throw new HubCommandError(
      `no hub in ${dataDir}: start one with \`anet hub start --data ${dataDir}\`, or name its directory with --data`,
    );
  const running = await runningHub(dataDir);
  let token: string;
  if (running) {
    const identity = await loadIdentity(dataDir);
    token = (await viaRunningHub(() => operatorPost<{ token: string }>(running.url, identity, '/invites', {}))).token;
  } else {
    const store = await openHubStore(dataDir, 'try again');
    try {
      token = await store.mintInvite(Date.now());
    } finally {
      await store.close();
    }
  }
  if (json) return printJson(io, { token, via: running ? 'hub' : 'store', ...(running ? { url: running.url } : {}) });
  io.out(`invite ${token}`);
  io.out(`single use: the node registers with \`anet hub-register --name NAME --invite ${token}\``);
}

/** The hub's store, opened by a command while no hub runs; `then`: what to do after stopping the hub that holds it. */
async function openHubStore(dataDir: string, then: string): Promise<HubStore> {
  try {
    return await HubStore.open(dataDir);
  } catch (err) {
    if (err instanceof StoreLockedError) {
      throw new HubCommandError(
        `a hub holds the store in ${dataDir} but left no ${hubRunFile(dataDir)}; stop it and ${then}, or restart it with \`anet hub start --data ${dataDir}\``,
      );
    }
    throw err;
  }
}

/** With no hub running, the same ledger code on the hub's store (the LevelDB lock is ours for a moment). */
async function mintInStore(dataDir: string, hubAid: string, aid: string, amount: string, nonce: string): Promise<MintAnswer> {
  const store = await openHubStore(dataDir, 'mint again');
  try {
    return await new Ledger(store, hubAid).mint(aid, amount, nonce);
  } catch (err) {
    if (err instanceof LedgerRefused) throw new HubCommandError(`the hub refused: ${err.code}: ${err.message}`);
    throw err;
  } finally {
    await store.close();
  }
}

/**
 * `anet-hub verify` (and `anet replay --verify` on a hub's data dir): every entry of the ledger's history,
 * each account's seqs from 1 and its hash chain (src/hub/ledger.ts). Damage is reported and exits 1.
 */
export async function cmdVerifyLedger(io: HubIo, dataDir: string, json: boolean): Promise<void> {
  const store = await HubStore.open(dataDir);
  try {
    const r = await checkLedger(store, 'full');
    if (json) printJson(io, { ledger: r, damage: null });
    else io.out(`ok: the ledger's history, ${r.entries} entries of ${r.accounts} accounts, each in order and matching its hash chain`);
  } catch (err) {
    if (!(err instanceof LedgerDamagedError)) throw err;
    if (json) printJson(io, { ledger: null, damage: { aid: err.aid, seq: err.seq, problem: err.problem } });
    else {
      io.out(
        `damaged: the history of ${err.aid} from seq ${err.seq}: ${err.problem}; restore ${dataDir} from a backup made before the damage`,
      );
      io.out(`FAILED: the ledger's history is damaged`);
    }
    throw new HubCommandError('', 1);
  } finally {
    await store.close();
  }
}

const HELP = `usage: anet-hub <command> [options]

  start [--port 8710] [--data DIR] [--require-invite] [--register-limit N] [--trust-proxy]
                       run a hub (directory, KEL store, relay, ledger) with its LevelDB in DIR (default ~/.anet-hub);
                       new AIDs: only with an invite, or at most N per address a minute (default 20, 0: no limit);
                       --trust-proxy: client addresses from X-Forwarded-For (behind a reverse proxy)
  mint AID AMOUNT [--data DIR]
                       credit AMOUNT credits to a registered AID (through the running hub, else its store)
  invite [--data DIR]  a single-use token that lets one new AID register (for --require-invite)
  verify [--data DIR]  check every entry of the ledger's history (the hub must be stopped)
  help                 this text

options: --data DIR (default ~/.anet-hub), --json for data output
The node's CLI runs the same commands as \`anet hub start|mint|invite\`.`;

const OPTIONS = {
  data: { type: 'string' },
  port: { type: 'string' },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
  'require-invite': { type: 'boolean', default: false },
  'register-limit': { type: 'string' },
  'trust-proxy': { type: 'boolean', default: false },
} as const;

/** `anet-hub <command>`: the exit code (SPEC §12: 0 success, 1 refused or failed, 2 usage). */
export async function hubMain(argv: string[], io: HubIo): Promise<number> {
  try {
    await dispatch(argv, io);
    return 0;
  } catch (err) {
    if (err instanceof HubCommandError) {
      if (err.message) io.err(`anet-hub: ${err.message}${err.usage ? ' (see `anet-hub help`)' : ''}`);
      return err.exitCode;
    }
    io.err(`anet-hub: ${(err as Error).message ?? String(err)}`);
    return 1;
  }
}

async function dispatch(argv: string[], io: HubIo): Promise<void> {
  const { values, positionals } = parseCommandLine(argv, OPTIONS, usageError);
  const [command, ...rest] = positionals;
  if (values.help || command === undefined || command === 'help') return io.out(HELP);
  switch (command) {
    case 'start':
      return cmdHubStart(io, values.data, values.port, {
        requireInvite: values['require-invite'],
        registerLimit: values['register-limit'],
        trustProxy: values['trust-proxy'],
      });
    case 'mint':
      return cmdHubMint(io, values.data, rest[0], rest[1], values.json);
    case 'invite':
      return cmdHubInvite(io, values.data, values.json);
    case 'verify':
      return cmdVerifyLedger(io, hubDir(values.data), values.json);
    default:
      throw usageError(`unknown command "${command}"`);
  }
}
