#!/usr/bin/env node
// The `anet` command line (SPEC §12).
import { parseCommandLine } from '../util/args.js';
import { resolveDataDir } from './datadir.js';
import { CliError, processIo, usageError, type Io } from './output.js';
import { cmdInit, cmdId, cmdKeyRotate, cmdKelExport, cmdKelVerify, cmdCardVerify } from './identity.js';
import { cmdDoctor } from './doctor.js';
import { cmdDemo } from './demo.js';
import { IdentityError } from '../identity/store.js';
import { StoreLockedError, StoreMissingError } from '../../store/db.js';
import { cmdReplay } from './replay.js';
import { cmdDaemon, cmdProfileSet, cmdFind, cmdCard } from './node.js';
import { cmdHubStart, cmdHubMint, cmdHubInvite, cmdHubRegister, cmdBalance } from './hub.js';
import { cmdList } from './lists.js';
import { cmdAudit } from './audit.js';
import { cmdCall, cmdTasks, cmdTask, cmdSend, cmdInbox, cmdReply, cmdPay, cmdReject } from './tasks.js';
import { serveMcp } from '../mcp/server.js';
import { ConfigInvalidError } from '../node/node.js';
import { ControlError } from '../node/open.js';
import { HubUnreachableError, HubRefusedError } from '../hub-client/client.js';

const HELP = `usage: anet <command> [options]

  init                 create the data directory, an identity and an example config.json
  id                   print this node's AID
  key rotate           rotate to the pre-rotated key (the AID stays the same)
  kel export [FILE]    write this node's KEL as CoreDet CBOR (--hex for hex text)
  kel verify FILE      validate a KEL file (CBOR or hex); prints ok or the failing rule
  replay [--actor ID] [--from SEQ] [--to SEQ] [--verify]
                       rebuild actor states from the journal; --verify compares them with the snapshots
  daemon               run the node: publish its card, serve the CLI on <data>/control.sock
  hub start [--port 8710] [--data DIR] [--require-invite] [--register-limit N] [--trust-proxy]
            [--db postgres://…] [--bus nats://…] [--mailbox-ttl 7d]
                       run a hub (directory, KEL store, relay, ledger) with its LevelDB in DIR (default ~/.anet-hub),
                       or its store in PostgreSQL (--db; DIR keeps its identity), one of N replicas with --bus;
                       mail for offline nodes is kept --mailbox-ttl (default 7d, at most 7d);
                       new AIDs: only with an invite, or at most N per address a minute (default 20, 0: no limit);
                       --trust-proxy: client addresses from X-Forwarded-For (behind a reverse proxy)
  hub mint AID AMOUNT [--data DIR]
                       credit AMOUNT credits to a registered AID (through the running hub, else its store)
  hub invite [--data DIR]
                       a single-use token that lets one new AID register (for --require-invite)
  balance              this node's credits on the hub: balance, held, the last 10 ledger entries
  hub-register --name NAME [--invite TOKEN]
                       set the name on your card and register with the hub (with the operator's invite)
  profile set [--name NAME] [--description TEXT]
                       set your card's name and description, and publish
  find [WORDS] [--skill ID] [--tag TAG]
                       search the hub directory (never contacts an agent)
  card AID             an agent's card, verified against its KEL
  card verify CARD.json --kel KELFILE [--now MS]
                       offline: check a signed card against a KEL; prints ok or the WIRE §3.4 code
  call AID CAPABILITY --args JSON [--file PATH]...
                       call another node's capability; prints the result and its verified receipt
  tasks, task ID       the tasks this node sent, and one of them
  audit cards [AID], audit prices AID
                       every card version published or seen, re-verified now; a provider's signed
                       prices over time and the card each payment was checked against
  pay TASK, reject TASK
                       pay a quote the auto-pay rule left to you (SPEC §10), or decline it
  send AID TEXT        a text task for another node's agent (or its operator's inbox)
  inbox, reply TASK TEXT
                       text tasks waiting for you (no local agent configured), and your answer
  allow|trust|deny add|rm AID, allow|trust|deny ls
                       the peer lists (read on every decision; trust includes allow)
  mcp                  an MCP server on stdio for a local agent: find, card, call, send, tasks, pay as tools
  doctor               check config.json, the sockets and token files it names, and the identity
  demo                 a guided tour in a temporary directory (what \`npm start\` runs)
  help                 this text

options: --data DIR (default $ANET_DATA_DIR or ~/.anet), --json for data output`;

const OPTIONS = {
  data: { type: 'string' },
  json: { type: 'boolean', default: false },
  hex: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
  actor: { type: 'string' },
  from: { type: 'string' },
  to: { type: 'string' },
  verify: { type: 'boolean', default: false },
  port: { type: 'string' },
  name: { type: 'string' },
  description: { type: 'string' },
  skill: { type: 'string' },
  tag: { type: 'string' },
  limit: { type: 'string' },
  args: { type: 'string' },
  file: { type: 'string', multiple: true },
  kel: { type: 'string' },
  now: { type: 'string' },
  invite: { type: 'string' },
  'require-invite': { type: 'boolean', default: false },
  'register-limit': { type: 'string' },
  'trust-proxy': { type: 'boolean', default: false },
  db: { type: 'string' },
  bus: { type: 'string' },
  'mailbox-ttl': { type: 'string' },
} as const;

export async function main(argv: string[], io: Io = processIo): Promise<number> {
  try {
    await dispatch(argv, io);
    return 0;
  } catch (err) {
    // A refusal the daemon sent back through the control socket is a command's refusal too.
    if (err instanceof CliError || err instanceof ControlError) {
      if (err.message) io.err(`anet: ${err.message}`);
      return err instanceof CliError ? err.exitCode : 1;
    }
    if (
      err instanceof IdentityError ||
      err instanceof StoreLockedError ||
      err instanceof StoreMissingError ||
      err instanceof ConfigInvalidError ||
      err instanceof HubUnreachableError ||
      err instanceof HubRefusedError
    ) {
      io.err(`anet: ${err.message}`);
      return 1;
    }
    io.err(`anet: ${(err as Error).message ?? String(err)}`);
    return 1;
  }
}

async function dispatch(argv: string[], io: Io): Promise<void> {
  const { values, positionals } = parseCommandLine(argv, OPTIONS, usageError);
  const [command, ...rest] = positionals;
  if (values.help || command === undefined || command === 'help') return io.out(HELP);
  const dataDir = resolveDataDir(values.data);
  const json = values.json;
  switch (command) {
    case 'init':
      return cmdInit(io, dataDir, json);
    case 'id':
      return cmdId(io, dataDir, json);
    case 'key':
      if (rest[0] !== 'rotate') throw usageError('the key command is `anet key rotate`');
      return cmdKeyRotate(io, dataDir, json);
    case 'kel':
      if (rest[0] === 'export') return cmdKelExport(io, dataDir, rest[1], values.hex);
      if (rest[0] === 'verify') return cmdKelVerify(io, rest[1], json);
      throw usageError('the kel commands are `anet kel export [FILE]` and `anet kel verify FILE`');
    case 'doctor':
      return cmdDoctor(io, dataDir, json);
    case 'replay':
      return cmdReplay(io, dataDir, { actor: values.actor, from: values.from, to: values.to, verify: values.verify, json });
    case 'daemon':
      return cmdDaemon(io, dataDir);
    case 'hub':
      if (rest[0] === 'mint') return cmdHubMint(io, values.data, rest[1], rest[2], json);
      if (rest[0] === 'invite') return cmdHubInvite(io, values.data, json);
      if (rest[0] !== 'start')
        throw usageError(
          'the hub commands are `anet hub start [--port N] [--data DIR]`, `anet hub mint AID AMOUNT [--data DIR]` and `anet hub invite [--data DIR]`',
        );
      return cmdHubStart(io, values.data, values.port, {
        requireInvite: values['require-invite'],
        registerLimit: values['register-limit'],
        trustProxy: values['trust-proxy'],
        db: values.db,
        bus: values.bus,
        mailboxTtl: values['mailbox-ttl'],
      });
    case 'balance':
      return cmdBalance(io, dataDir, json);
    case 'hub-register':
      if (!values.name) throw usageError('hub-register needs --name NAME');
      return cmdHubRegister(io, dataDir, values.name, values.invite, json);
    case 'profile':
      if (rest[0] !== 'set') throw usageError('the profile command is `anet profile set --name NAME --description TEXT`');
      return cmdProfileSet(io, dataDir, values.name, values.description, json);
    case 'find':
      return cmdFind(io, dataDir, rest, { skill: values.skill, tag: values.tag, limit: values.limit }, json);
    case 'card':
      if (rest[0] === 'verify') return cmdCardVerify(io, rest[1], values.kel, values.now, json);
      return cmdCard(io, dataDir, rest[0], json);
    case 'call':
      return cmdCall(io, dataDir, rest[0], rest[1], values.args, values.file ?? [], json);
    case 'tasks':
      return cmdTasks(io, dataDir, json);
    case 'send':
      return cmdSend(io, dataDir, rest[0], rest.slice(1), json);
    case 'inbox':
      return cmdInbox(io, dataDir, json);
    case 'reply':
      return cmdReply(io, dataDir, rest[0], rest.slice(1), json);
    case 'task':
      return cmdTask(io, dataDir, rest[0], json);
    case 'audit':
      return cmdAudit(io, dataDir, rest[0], rest[1], json);
    case 'pay':
      return cmdPay(io, dataDir, rest[0], json);
    case 'reject':
      return cmdReject(io, dataDir, rest[0], json);
    case 'allow':
    case 'trust':
    case 'deny':
      return cmdList(io, dataDir, command, rest[0], rest[1], json);
    case 'mcp':
      return serveMcp(dataDir);
    case 'demo':
      return cmdDemo(io, main);
    default:
      throw usageError(`unknown command "${command}"`);
  }
}
