// `anet hub start`, `anet hub mint`, `anet hub invite` (the hub's operator: an alias of `anet-hub`, whose
// code, src/hub/main.ts, is imported only when one of them runs), `anet hub-register --invite` and
// `anet balance` (a node's ledger account).
import { HubClient } from '../hub-client/client.js';
import { loadIdentity } from '../identity/store.js';
import { cmdProfileSet } from './node.js';
import { run } from '../node/open.js';
import { readConfig } from '../config/load.js';
import { CliError, printJson, usageError, type Io } from './output.js';
import type { HubStartFlags } from '../hub/main.js';

export type { HubStartFlags } from '../hub/main.js';

/** The hub's commands live in the hub (src/hub/main.ts), loaded only when one is asked for. */
async function hubCommand(run: (hub: typeof import('../hub/main.js')) => Promise<void>): Promise<void> {
  const hub = await import('../hub/main.js');
  try {
    await run(hub);
  } catch (err) {
    if (err instanceof hub.HubCommandError) throw err.usage ? usageError(err.message) : new CliError(err.message, err.exitCode);
    throw err;
  }
}

export async function cmdHubStart(
  io: Io,
  dataFlag: string | undefined,
  portFlag: string | undefined,
  flags: HubStartFlags = {},
): Promise<void> {
  return hubCommand((hub) => hub.cmdHubStart(io, dataFlag, portFlag, flags));
}

export async function cmdHubMint(
  io: Io,
  dataFlag: string | undefined,
  aid: string | undefined,
  amount: string | undefined,
  json: boolean,
): Promise<void> {
  return hubCommand((hub) => hub.cmdHubMint(io, dataFlag, aid, amount, json));
}

/** `anet hub invite`: a single-use token that lets one new AID register (through the running hub, else its store). */
export async function cmdHubInvite(io: Io, dataFlag: string | undefined, json: boolean): Promise<void> {
  return hubCommand((hub) => hub.cmdHubInvite(io, dataFlag, json));
}

/** `anet replay --verify` on a hub's data dir: every entry of the ledger's history. */
export async function cmdHubVerify(io: Io, dataDir: string, json: boolean): Promise<void> {
  return hubCommand((hub) => hub.cmdVerifyLedger(io, dataDir, json));
}

/**
 * `anet hub-register --name NAME [--invite TOKEN]`: with an invite, the node first registers itself
 * (KEL and name) with it, then publishes as `profile set` does; a node already registered needs none.
 */
export async function cmdHubRegister(io: Io, dataDir: string, name: string, invite: string | undefined, json: boolean): Promise<void> {
  if (invite !== undefined) {
    if (!/^[0-9a-f]{32}$/.test(invite)) throw usageError('--invite takes the 32 hex characters `anet hub invite` printed');
    const { config, problems } = await readConfig(dataDir);
    if (!config)
      throw new CliError(`config.json in ${dataDir} has problems: run \`anet doctor --data ${dataDir}\` (${problems.length} found)`);
    await new HubClient(config.hub, await loadIdentity(dataDir)).register(name, null, invite);
  }
  return cmdProfileSet(io, dataDir, name, undefined, json);
}

export async function cmdBalance(io: Io, dataDir: string, json: boolean): Promise<void> {
  const account = await run(dataDir, 'balance', {});
  if (json) return printJson(io, account);
  io.out(`balance ${account.balance} credits (${account.held} held)`);
  for (const e of account.history.slice(-10)) {
    const other = e.counterparty ? (e.kind === 'credit' ? ` from ${e.counterparty}` : ` to ${e.counterparty}`) : '';
    io.out(`${new Date(e.at).toISOString()}  ${e.kind.padEnd(7)}  ${e.amount}${other}; balance ${e.balance}`);
  }
}
