// `anet hub start`, `anet hub mint`, `anet hub invite` (the hub's operator), `anet hub-register --invite`
// and `anet balance` (a node's ledger account).
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { randomHex } from '../util/random.js';
import { readFile } from 'node:fs/promises';
import { startHub, hubRunFile } from '../hub/server.js';
import { HubStore } from '../hub/store.js';
import { Ledger, LedgerRefused } from '../hub/ledger.js';
import { type Account, type MintAnswer } from '../protocol/hub-api.js';
import { HubClient } from '../hub-client/client.js';
import { hasIdentity, loadIdentity } from '../identity/store.js';
import { isAid } from '../identity/cid.js';
import { isAmount } from '../protocol/authorization.js';
import { StoreLockedError } from '../../store/db.js';
import { ensureDir, isNotFound } from '../util/fsutil.js';
import { viaNode, cmdProfileSet } from './node.js';
import { readConfig } from '../config/load.js';
import { CliError, printJson, usageError, untilSignal, type Io } from './output.js';

const hubDir = (dataFlag: string | undefined) => (dataFlag ? resolve(dataFlag) : join(homedir(), '.anet-hub'));

export interface HubStartFlags {
  requireInvite?: boolean;
  /** New AIDs per address a minute (0: no limit). */
  registerLimit?: string;
  trustProxy?: boolean;
}

export async function cmdHubStart(io: Io, dataFlag: string | undefined, portFlag: string | undefined, flags: HubStartFlags = {}): Promise<void> {
  const port = portFlag === undefined ? 8710 : Number(portFlag);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw usageError('--port takes a port number (0 picks a free one)');
  const limit = flags.registerLimit === undefined ? undefined : Number(flags.registerLimit);
  if (limit !== undefined && !(Number.isInteger(limit) && limit >= 0)) throw usageError('--register-limit takes a whole number of new AIDs per address a minute (0: no limit)');
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
  const admission = flags.requireInvite ? 'new AIDs need an invite (`anet hub invite`)' : limit === 0 ? 'new AIDs are not limited' : `at most ${limit ?? 20} new AIDs per address a minute`;
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

export async function cmdHubMint(io: Io, dataFlag: string | undefined, aid: string | undefined, amount: string | undefined, json: boolean): Promise<void> {
  if (!aid || !amount) throw usageError('hub mint needs an AID and an amount: `anet hub mint AID AMOUNT [--data HUBDIR]`');
  if (!isAid(aid)) throw usageError(`"${aid}" is not a full AID (bafyrei...)`);
  if (!isAmount(amount)) throw usageError(`"${amount}" is not an amount: a whole number of credits from 1 to 9223372036854775807`);
  const dataDir = hubDir(dataFlag);
  if (!(await hasIdentity(dataDir))) throw new CliError(`no hub in ${dataDir}: start one with \`anet hub start --data ${dataDir}\`, or name its directory with --data`);
  const identity = await loadIdentity(dataDir);
  const nonce = randomHex(16);
  const running = await runningHub(dataDir);
  let answer: MintAnswer;
  let via: string;
  if (running) {
    answer = await new HubClient(running.url, identity).mint(aid, amount, nonce);
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
export async function cmdHubInvite(io: Io, dataFlag: string | undefined, json: boolean): Promise<void> {
  const dataDir = hubDir(dataFlag);
  if (!(await hasIdentity(dataDir))) throw new CliError(`no hub in ${dataDir}: start one with \`anet hub start --data ${dataDir}\`, or name its directory with --data`);
  const running = await runningHub(dataDir);
  let token: string;
  if (running) token = await new HubClient(running.url, await loadIdentity(dataDir)).invite();
  else {
    const store = await openHubStore(dataDir);
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

/**
 * `anet hub-register --name NAME [--invite TOKEN]`: with an invite, the node first registers itself
 * (KEL and name) with it, then publishes as `profile set` does; a node already registered needs none.
 */
export async function cmdHubRegister(io: Io, dataDir: string, name: string, invite: string | undefined, json: boolean): Promise<void> {
  if (invite !== undefined) {
    if (!/^[0-9a-f]{32}$/.test(invite)) throw usageError('--invite takes the 32 hex characters `anet hub invite` printed');
    const { config, problems } = await readConfig(dataDir);
    if (!config) throw new CliError(`config.json in ${dataDir} has problems: run \`anet doctor --data ${dataDir}\` (${problems.length} found)`);
    await new HubClient(config.hub, await loadIdentity(dataDir)).register(name, null, invite);
  }
  return cmdProfileSet(io, dataDir, name, undefined, json);
}

async function openHubStore(dataDir: string): Promise<HubStore> {
  try {
    return await HubStore.open(dataDir);
  } catch (err) {
    if (err instanceof StoreLockedError) {
      throw new CliError(`a hub holds the store in ${dataDir} but left no ${hubRunFile(dataDir)}; stop it and try again, or restart it with \`anet hub start --data ${dataDir}\``);
    }
    throw err;
  }
}

/** With no hub running, the same ledger code on the hub's store (the LevelDB lock is ours for a moment). */
async function mintInStore(dataDir: string, hubAid: string, aid: string, amount: string, nonce: string): Promise<MintAnswer> {
  let store: HubStore;
  try {
    store = await HubStore.open(dataDir);
  } catch (err) {
    if (err instanceof StoreLockedError) {
      throw new CliError(`a hub holds the store in ${dataDir} but left no ${hubRunFile(dataDir)}; stop it and mint again, or restart it with \`anet hub start --data ${dataDir}\``);
    }
    throw err;
  }
  try {
    return await new Ledger(store, hubAid).mint(aid, amount, nonce);
  } catch (err) {
    if (err instanceof LedgerRefused) throw new CliError(`the hub refused: ${err.code}: ${err.message}`);
    throw err;
  } finally {
    await store.close();
  }
}

export async function cmdBalance(io: Io, dataDir: string, json: boolean): Promise<void> {
  const account = await viaNode<Account>(dataDir, 'balance', {}, (node) => node.client.account(node.identity.aid));
  if (json) return printJson(io, account);
  io.out(`balance ${account.balance} credits (${account.held} held)`);
  for (const e of account.history.slice(-10)) {
    const other = e.counterparty ? (e.kind === 'credit' ? ` from ${e.counterparty}` : ` to ${e.counterparty}`) : '';
    io.out(`${new Date(e.at).toISOString()}  ${e.kind.padEnd(7)}  ${e.amount}${other}; balance ${e.balance}`);
  }
}
