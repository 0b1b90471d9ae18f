// A hub in its own process for bench/hub, driven over IPC: started with startHub as `anet-hub start`
// starts it (new AIDs not rate-limited: the bench registers thousands from one address), it answers
// `cpu` (process.cpuUsage, every thread, µs), `mem` (after two full GCs) and `stop`.
import { startHub } from '../../src/hub/server.js';
import { answerBench } from './ipc.js';

const args = JSON.parse(process.argv[2]!) as { dataDir: string; db?: string; bus?: string };
const t0 = performance.now();
const hub = await startHub({
  dataDir: args.dataDir,
  port: 0,
  registrationsPerMinute: 0,
  ...(args.db ? { db: args.db } : {}),
  ...(args.bus ? { bus: args.bus } : {}),
});
const startMs = performance.now() - t0;

answerBench(() => hub.close());
process.send!({ url: hub.url, aid: hub.aid, startMs });
