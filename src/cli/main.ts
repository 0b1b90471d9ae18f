#!/usr/bin/env node
// The `anet` command line (SPEC §12).
import { parseCommandLine } from '../util/args.js';
import { resolveDataDir } from './datadir.js';
import { CliError, processIo, usageError, type Io } from './output.js';
import { ControlError } from '../node/open.js';

// Each command's module is loaded when it runs: a command loads only what it uses (\`anet call\` through
// a daemon needs none of the hub's, the node's or MCP's code: ~45 MB less while it uploads files).
const identity = () => import('./identity.js');
const nodeCommands = () => import('./node.js');
const hubCommands = () => import('./hub.js');
const tasks = () => import('./tasks.js');

const HELP = `usage: anet <command> [options]

  init                 create the data directory, an identity and an example config.json
  id                   print this node's AID
  key rotate           rotate to the pre-rotated key (the AID stays the same)
  kel export [FILE]    write this node's KEL as CoreDet CBOR (--hex for hex text)
  kel verify FILE      validate a KEL file (CBOR or hex); prints ok or the failing rule
  replay [--actor ID] [--from SEQ] [--to SEQ] [--verify]
                       rebuild actor states from the journal; --verify compares them with the snapshots
  daemon [--metrics 127.0.0.1:PORT] [--log-level debug|info|warn|error]
                       run the node: publish its card, serve the CLI (and GET /metrics) on <data>/control.sock;
                       --metrics: the metrics on HTTP too (loopback only); logs on stderr (JSON unless a terminal)
  hub start [--port 8710] [--data DIR] [--require-invite] [--register-limit N] [--trust-proxy]
            [--db postgres://…] [--bus nats://…] [--mailbox-ttl 7d] [--log-level debug|info|warn|error]
                       run a hub (directory, KEL store, relay, ledger) with its LevelDB in DIR (default ~/.anet-hub),
                       or its store in PostgreSQL (--db; DIR keeps its identity), one of N replicas with --bus;
                       mail for offline nodes is kept --mailbox-ttl (default 7d, at most 7d);
                       new AIDs: only with an invite, or at most N per address a minute (default 20, 0: no limit);
                       --trust-proxy: client addresses from X-Forwarded-For (behind a reverse proxy);
                       GET /metrics: Prometheus metrics; logs on stderr (JSON unless a terminal; AIDs at debug only)
  hub mint AID AMOUNT [--data DIR]
                       credit AMOUNT credits to a registered AID (through the running hub, else its store)
  hub invite [--data DIR]
                       a single-use token that lets one new AID register (for --require-invite)
  status               the daemon: uptime, hub stream, card seq, each capability's quota windows and
                       in-flight counts, tasks by state, journal size and last checkpoint
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
  cancel TASK          stop a task you sent: a quote is declined, a running call is stopped by its
                       provider (a payment held for it is given back)
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
  metrics: { type: 'string' },
  'log-level': { type: 'string' },
} as const;

/** Errors whose message is the whole story: printed as one line, exit code 1. */
const ONE_LINE_ERRORS = new Set([
  'IdentityError',
  'StoreLockedError',
  'StoreMissingError',
  'ConfigInvalidError',
  'HubUnreachableError',
  'HubRefusedError',
]);

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
    // By name: their modules are loaded only by the commands that throw them.
    if (ONE_LINE_ERRORS.has((err as Error)?.name)) {
      io.err(`anet: ${(err as Error).message}`);
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
      return (await identity()).cmdInit(io, dataDir, json);
    case 'id':
      return (await identity()).cmdId(io, dataDir, json);
    case 'key':
      if (rest[0] !== 'rotate') throw usageError('the key command is `anet key rotate`');
      return (await identity()).cmdKeyRotate(io, dataDir, json);
    case 'kel':
      if (rest[0] === 'export') return (await identity()).cmdKelExport(io, dataDir, rest[1], values.hex);
      if (rest[0] === 'verify') return (await identity()).cmdKelVerify(io, rest[1], json);
      throw usageError('the kel commands are `anet kel export [FILE]` and `anet kel verify FILE`');
    case 'doctor':
      return (await import('./doctor.js')).cmdDoctor(io, dataDir, json);
    case 'replay':
      return (await import('./replay.js')).cmdReplay(io, dataDir, {
        actor: values.actor,
        from: values.from,
        to: values.to,
        verify: values.verify,
        json,
      });
    case 'daemon':
      return (await nodeCommands()).cmdDaemon(io, dataDir, { metrics: values.metrics, logLevel: values['log-level'] });
    case 'hub':
      if (rest[0] === 'mint') return (await hubCommands()).cmdHubMint(io, values.data, rest[1], rest[2], json);
      if (rest[0] === 'invite') return (await hubCommands()).cmdHubInvite(io, values.data, json);
      if (rest[0] !== 'start')
        throw usageError(
          'the hub commands are `anet hub start [--port N] [--data DIR]`, `anet hub mint AID AMOUNT [--data DIR]` and `anet hub invite [--data DIR]`',
        );
      return (await hubCommands()).cmdHubStart(io, values.data, values.port, {
        requireInvite: values['require-invite'],
        registerLimit: values['register-limit'],
        trustProxy: values['trust-proxy'],
        db: values.db,
        bus: values.bus,
        mailboxTtl: values['mailbox-ttl'],
        logLevel: values['log-level'],
      });
    case 'status':
      return (await import('./status.js')).cmdStatus(io, dataDir, json);
    case 'balance':
      return (await hubCommands()).cmdBalance(io, dataDir, json);
    case 'hub-register':
      if (!values.name) throw usageError('hub-register needs --name NAME');
      return (await hubCommands()).cmdHubRegister(io, dataDir, values.name, values.invite, json);
    case 'profile':
      if (rest[0] !== 'set') throw usageError('the profile command is `anet profile set --name NAME --description TEXT`');
      return (await nodeCommands()).cmdProfileSet(io, dataDir, values.name, values.description, json);
    case 'find':
      return (await nodeCommands()).cmdFind(io, dataDir, rest, { skill: values.skill, tag: values.tag, limit: values.limit }, json);
    case 'card':
      if (rest[0] === 'verify') return (await identity()).cmdCardVerify(io, rest[1], values.kel, values.now, json);
      return (await nodeCommands()).cmdCard(io, dataDir, rest[0], json);
    case 'call':
      return (await tasks()).cmdCall(io, dataDir, rest[0], rest[1], values.args, values.file ?? [], json);
    case 'tasks':
      return (await tasks()).cmdTasks(io, dataDir, json);
    case 'send':
      return (await tasks()).cmdSend(io, dataDir, rest[0], rest.slice(1), json);
    case 'inbox':
      return (await tasks()).cmdInbox(io, dataDir, json);
    case 'reply':
      return (await tasks()).cmdReply(io, dataDir, rest[0], rest.slice(1), json);
    case 'task':
      return (await tasks()).cmdTask(io, dataDir, rest[0], json);
    case 'audit':
      return (await import('./audit.js')).cmdAudit(io, dataDir, rest[0], rest[1], json);
    case 'pay':
      return (await tasks()).cmdPay(io, dataDir, rest[0], json);
    case 'reject':
      return (await tasks()).cmdReject(io, dataDir, rest[0], json);
    case 'cancel':
      return (await tasks()).cmdCancel(io, dataDir, rest[0], json);
    case 'allow':
    case 'trust':
    case 'deny':
      return (await import('./lists.js')).cmdList(io, dataDir, command, rest[0], rest[1], json);
    case 'mcp':
      return (await import('../mcp/server.js')).serveMcp(dataDir);
    case 'demo':
      return (await import('./demo.js')).cmdDemo(io, main);
    default:
      throw usageError(`unknown command "${command}"`);
  }
}
