// The hub's commands (SPEC §11, §12): start, mint, invite, and the check of its ledger's history. The
// hub's one entry: `anet-hub` (src/hub/bin.ts) runs hubMain(); the node's `anet hub …`, `anet demo` and
// `anet replay --verify` of a hub's directory import this module when asked, and nothing else of the hub.
// It loads hub modules only (no node code), so a hub-only install needs none of the node's packages.
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { readFile } from 'node:fs/promises';
import { parseCommandLine } from '../util/args.js';
import { randomHex } from '../util/random.js';
import { untilSignal } from '../util/signal.js';
import { ensureDir, isNotFound } from '../util/fsutil.js';
import { hasIdentity, loadIdentity } from '../identity/store.js';
import { isAid } from '../identity/cid.js';
import { isAmount } from '../protocol/authorization.js';
import type { MintAnswer } from '../protocol/hub-api.js';
import { MAX_MESSAGE_TTL_MS } from '../protocol/envelope.js';
import { StoreLockedError } from '../../store/db.js';
import { startHub, hubRunFile, hubStoreFile } from './server.js';
import { openLevelStorage, type LevelStorage } from './storage/level.js';
import { openStorage } from './storage/open.js';
import { mintInviteToken } from './registration.js';
import { Ledger, LedgerRefused, LedgerDamagedError, checkLedger } from './ledger.js';
import { operatorPost, OperatorRequestError } from './operator.js';
import { createLogger, isLogLevel, logLevel, redactAids, type Log } from '../util/log.js';

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

const hubDir = (dataFlag: string | undefined) => (dataFlag ? resolve(dataFlag) : join(homedir(), '.anet-hub'));

export interface HubStartFlags {
  requireInvite?: boolean;
  /** New AIDs per address a minute (0: no limit). */
  registerLimit?: string;
  trustProxy?: boolean;
  /** A PostgreSQL URL: the storage shared by replicas (default: the embedded LevelDB in the data dir). */
  db?: string;
  /** A NATS URL: replicas hand each other envelopes on it (needs --db). */
  bus?: string;
  /** How long mail for an offline node is kept: `7d`, `36h`, `90m` (default 7d). */
  mailboxTtl?: string;
  /** `--log-level` (else ANET_LOG_LEVEL, else info). */
  logLevel?: string;
}

/** The longest mail may wait: a node refuses an envelope whose exp is further (src/protocol/envelope.ts). */
const MAX_MAILBOX_TTL_MS = MAX_MESSAGE_TTL_MS;

/** `7d`, `36h`, `90m`, `45s` → milliseconds; null when it is none of these. */
export function parseDuration(text: string): number | null {
  const m = /^([0-9]{1,6})(d|h|m|s)$/.exec(text);
  if (!m) return null;
  const unit = { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1000 }[m[2] as 'd' | 'h' | 'm' | 's'];
  return Number(m[1]) * unit;
}

/** The checked --db, --bus and --mailbox-ttl of `hub start`. */
function storageFlags(flags: HubStartFlags): { db?: string; bus?: string; ttlMs?: number } {
  if (flags.bus !== undefined && flags.db === undefined)
    throw usageError('--bus needs --db: replicas share one PostgreSQL (`--db postgres://… --bus nats://…`)');
  if (flags.bus !== undefined && !/^(nats|tls):\/\/./.test(flags.bus))
    throw usageError(`--bus takes a NATS URL (nats://host:4222), not "${flags.bus}"`);
  if (flags.db !== undefined && !/^postgres(ql)?:\/\/./.test(flags.db))
    throw usageError(`--db takes a PostgreSQL URL (postgres://user:password@host:5432/database), not "${flags.db}"`);
  let ttlMs: number | undefined;
  if (flags.mailboxTtl !== undefined) {
    const ms = parseDuration(flags.mailboxTtl);
    if (ms === null || ms < 60_000 || ms > MAX_MAILBOX_TTL_MS)
      throw usageError(`--mailbox-ttl takes a duration from 1m to 7d (e.g. 7d, 36h, 90m): nodes refuse mail older than 7 days`);
    ttlMs = ms;
  }
  return { ...(flags.db ? { db: flags.db } : {}), ...(flags.bus ? { bus: flags.bus } : {}), ...(ttlMs ? { ttlMs } : {}) };
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
  const { db, bus, ttlMs } = storageFlags(flags);
  const log = hubLog(io, flags.logLevel);
  const dataDir = hubDir(dataFlag);
  await ensureDir(dataDir, 0o700);
  // Listened for before starting: a stop asked while the hub starts (systemd's, say) stops it cleanly once started.
  const signaled = untilSignal();
  const hub = await startHub({
    dataDir,
    port,
    ...(db ? { db } : {}),
    ...(bus ? { bus } : {}),
    ...(ttlMs ? { limits: { ttlMs } } : {}),
    requireInvite: flags.requireInvite ?? false,
    trustProxy: flags.trustProxy ?? false,
    ...(limit !== undefined ? { registrationsPerMinute: limit } : {}),
    log,
  });
  hub.metrics.withProcessMetrics();
  io.out(
    `anet hub: ready on ${hub.url}; hub AID ${hub.aid}; data ${dataDir}${db ? `; store ${hub.storage.where}` : ''}${bus ? `; bus ${bus}` : ''}`,
  );
  const admission = flags.requireInvite
    ? 'new AIDs need an invite (`anet hub invite`)'
    : limit === 0
      ? 'new AIDs are not limited'
      : `at most ${limit ?? 20} new AIDs per address a minute`;
  io.out(`anet hub: ${admission}${flags.trustProxy ? '; client addresses from X-Forwarded-For' : ''}`);
  await signaled;
  await hub.close();
  io.out('anet hub: stopped');
}

/**
 * The hub's log on stderr (src/util/log.ts): JSON lines, or readable ones on a terminal. Above debug every
 * AID in a line is masked, so no log at info lets anyone rebuild who registered, published or talked
 * to whom; `--log-level debug` shows them, for an operator tracing one agent.
 */
export function hubLog(io: HubIo, flag: string | undefined): Log {
  const level = logLevel(flag);
  if (!isLogLevel(level)) throw usageError(level);
  const logger = createLogger({ name: 'anet hub', level, write: (line) => io.err(line), readable: process.stderr.isTTY === true });
  return (line, at = 'info') => logger[at](at === 'debug' ? line : redactAids(line));
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
    const storage = await openHubStore(dataDir, 'try again');
    try {
      token = await mintInviteToken(storage, Date.now());
    } finally {
      await storage.close();
    }
  }
  if (json) return printJson(io, { token, via: running ? 'hub' : 'store', ...(running ? { url: running.url } : {}) });
  io.out(`invite ${token}`);
  io.out(`single use: the node registers with \`anet hub-register --name NAME --invite ${token}\``);
}

/** The hub's store, opened by a command while no hub runs; `then`: what to do after stopping the hub that holds it. */
async function openHubStore(dataDir: string, then: string): Promise<LevelStorage> {
  const elsewhere = await storeElsewhere(dataDir);
  if (elsewhere)
    throw new HubCommandError(
      `the hub of ${dataDir} keeps its store in PostgreSQL (${elsewhere}) and none of its replicas is running here: start one (\`anet hub start --data ${dataDir} --db …\`) and ${then}`,
    );
  try {
    return await openLevelStorage(dataDir);
  } catch (err) {
    if (err instanceof StoreLockedError) {
      throw new HubCommandError(
        `a hub holds the store in ${dataDir} but left no ${hubRunFile(dataDir)}; stop it and ${then}, or restart it with \`anet hub start --data ${dataDir}\``,
      );
    }
    throw err;
  }
}

/** Where a data dir's hub keeps its store when it is not the embedded LevelDB (see hubStoreFile); null for LevelDB. */
async function storeElsewhere(dataDir: string): Promise<string | null> {
  try {
    const marker = JSON.parse(await readFile(hubStoreFile(dataDir), 'utf8')) as { kind?: unknown; where?: unknown };
    return marker.kind === 'postgres' && typeof marker.where === 'string' ? marker.where : null;
  } catch (err) {
    if (isNotFound(err) || err instanceof SyntaxError) return null;
    throw err;
  }
}

/** With no hub running, the same ledger code on the hub's store (the LevelDB lock is ours for a moment). */
async function mintInStore(dataDir: string, hubAid: string, aid: string, amount: string, nonce: string): Promise<MintAnswer> {
  const storage = await openHubStore(dataDir, 'mint again');
  try {
    return await new Ledger(storage, hubAid).mint(aid, amount, nonce);
  } catch (err) {
    if (err instanceof LedgerRefused) throw new HubCommandError(`the hub refused: ${err.code}: ${err.message}`);
    throw err;
  } finally {
    await storage.close();
  }
}

/**
 * `anet-hub verify` (and `anet replay --verify` on a hub's data dir): every entry of the ledger's history,
 * each account's seqs from 1 and its hash chain (src/hub/ledger.ts). Damage is reported and exits 1.
 */
export async function cmdVerifyLedger(io: HubIo, dataDir: string, json: boolean, db?: string): Promise<void> {
  const elsewhere = db === undefined ? await storeElsewhere(dataDir) : null;
  if (elsewhere)
    throw new HubCommandError(`the hub of ${dataDir} keeps its store in PostgreSQL (${elsewhere}): verify it with --db and that URL`);
  const storage = db === undefined ? await openLevelStorage(dataDir) : await openStorage(dataDir, db);
  try {
    const r = await checkLedger(storage.ledger, storage.where, 'full');
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
    await storage.close();
  }
}

const HELP = `usage: anet-hub <command> [options]

  start [--port 8710] [--data DIR] [--require-invite] [--register-limit N] [--trust-proxy]
        [--db postgres://…] [--bus nats://…] [--mailbox-ttl 7d] [--log-level debug|info|warn|error]
                       run a hub (directory, KEL store, relay, ledger) with its LevelDB in DIR (default ~/.anet-hub),
                       or with its store in PostgreSQL (--db; DIR keeps its identity), one of N replicas with --bus;
                       mail for offline nodes is kept --mailbox-ttl (default 7d, at most 7d);
                       new AIDs: only with an invite, or at most N per address a minute (default 20, 0: no limit);
                       --trust-proxy: client addresses from X-Forwarded-For (behind a reverse proxy);
                       GET /metrics: Prometheus metrics; logs on stderr (JSON unless a terminal; AIDs at debug only)
  mint AID AMOUNT [--data DIR]
                       credit AMOUNT credits to a registered AID (through the running hub, else its store)
  invite [--data DIR]  a single-use token that lets one new AID register (for --require-invite)
  verify [--data DIR] [--db postgres://…]
                       check every entry of the ledger's history (a LevelDB hub must be stopped)
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
  db: { type: 'string' },
  bus: { type: 'string' },
  'mailbox-ttl': { type: 'string' },
  'log-level': { type: 'string' },
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
        db: values.db,
        bus: values.bus,
        mailboxTtl: values['mailbox-ttl'],
        logLevel: values['log-level'],
      });
    case 'mint':
      return cmdHubMint(io, values.data, rest[0], rest[1], values.json);
    case 'invite':
      return cmdHubInvite(io, values.data, values.json);
    case 'verify':
      return cmdVerifyLedger(io, hubDir(values.data), values.json, values.db);
    default:
      throw usageError(`unknown command "${command}"`);
  }
}
