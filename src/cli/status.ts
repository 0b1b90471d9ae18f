// `anet status [--json]` (issue 22): the running daemon's state, through its control socket. Without a
// daemon the node is opened here to read the same data, and the first line says the daemon is not running.
import { askDaemon, run } from '../node/open.js';
import { printJson, type Io } from './output.js';
import type { NodeStatus, WindowUse } from '../node/operations.js';

export async function cmdStatus(io: Io, dataDir: string, json: boolean): Promise<void> {
  const fromDaemon = await askDaemon(dataDir, 'status', {});
  const status = fromDaemon ?? (await run(dataDir, 'status', {}));
  if (json) return printJson(io, { daemon: fromDaemon !== undefined, ...status });
  for (const line of statusLines(status, fromDaemon !== undefined)) io.out(line);
}

/** The status as the operator reads it: one fact a line, capabilities indented under their heading. */
export function statusLines(s: NodeStatus, daemon: boolean): string[] {
  const relay = s.relay;
  const lines = [
    daemon ? `daemon     running, pid ${s.pid}, up ${duration(s.uptimeMs)}` : 'daemon     not running (`anet daemon` starts it)',
    `node       ${s.aid}`,
    `hub        ${s.hub}: ${relay ? (relay.connected ? 'stream open' : 'stream closed, reconnecting') : 'not connected'}${relay ? `, ${relay.received} received, ${relay.sent} sent` : ''}`,
    `card       ${s.card?.wire ? `seq ${s.card.seq} published` : 'none published'}`,
    `tasks      sent: ${sentLine(s.tasks.sent)}; running here: ${s.tasks.running}; inbox: ${s.tasks.inbox}`,
    `journal    ${s.journal.events} events, last checkpoint at ${s.journal.lastCheckpoint}, ${mib(s.journal.bytes)} on disk`,
  ];
  if (s.capabilities.length === 0) return [...lines, 'capabilities: none offered'];
  lines.push('capabilities:');
  for (const c of s.capabilities) {
    lines.push(
      `  ${c.id}  in flight ${c.inflight.running}/${c.inflight.max} (${c.inflight.perCaller} per caller), all callers ${window(c.globalPerMin)} this minute`,
    );
    for (const k of c.callers) lines.push(`    ${k.caller}  ${window(k.perMin)} this minute, ${window(k.perDay)} today`);
  }
  return lines;
}

const window = (w: WindowUse) => `${w.used}/${w.limit}`;
const mib = (bytes: number) => `${(bytes / 1048576).toFixed(1)} MiB`;

function sentLine(sent: NodeStatus['tasks']['sent']): string {
  const parts = Object.entries(sent).map(([state, n]) => `${n} ${state}`);
  return parts.length ? parts.join(', ') : 'none';
}

/** `3 d 4 h`, `2 h 5 min`, `4 min 10 s`, `12 s`. */
export function duration(ms: number): string {
  const s = Math.floor(ms / 1000);
  const [d, h, m] = [Math.floor(s / 86400), Math.floor(s / 3600) % 24, Math.floor(s / 60) % 60];
  if (d) return `${d} d ${h} h`;
  if (h) return `${h} h ${m} min`;
  if (m) return `${m} min ${s % 60} s`;
  return `${s} s`;
}
