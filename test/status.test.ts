// Issue 22, `anet status` (SPEC §12, §4.1, §14): what the operator of a running node reads first. Real
// daemons on a real hub; the quota windows shown are the bucket actors' as the journal carries them over a
// restart.
import test from 'ava';
import { runCli } from './helpers/cli.js';
import { market } from './helpers/payments.js';
import { operate } from '../src/node/operations.js';
import type { NodeStatus } from '../src/node/operations.js';

const status = async (dir: string) => {
  const r = await runCli(['status', '--json', '--data', dir]);
  if (r.code !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout) as NodeStatus & { daemon: boolean };
};

test('issue 22 / SPEC §4.1, §14: anet status shows quota windows and in-flight counts, and after a restart the windows carried over', async (t) => {
  const { net, p, c, provider, caller } = await market(t, [{ id: 'demo.echo' }]);
  for (let i = 0; i < 3; i++) {
    const r = await operate(caller.node, 'call', { aid: p.aid, capability: 'demo.echo', args: '{}', files: [], waitMs: 10_000 });
    t.is(r.state, 'completed');
  }
  const before = await status(p.dir);
  t.true(before.daemon);
  t.is(before.aid, p.aid);
  t.true(before.relay!.connected);
  t.regex(before.card!.seq, /^\d+$/);
  const echo = before.capabilities.find((x) => x.id === 'demo.echo')!;
  t.like(echo, { inflight: { running: 0, max: 16, perCaller: 1 }, globalPerMin: { used: 3, limit: 1200 } });
  t.deepEqual(echo.callers, [{ caller: c.aid, perMin: { used: 3, limit: 60 }, perDay: { used: 3, limit: 2000 } }]);
  t.true(before.journal.events > 0);
  t.like((await status(c.dir)).tasks, { sent: { completed: 3 }, running: 0, inbox: 0 });

  await provider.close();
  const offline = await runCli(['status', '--data', p.dir]);
  t.is(offline.code, 0, offline.stderr);
  t.regex(offline.stdout, /^daemon {5}not running/);
  await net.start(p.dir);
  const after = await status(p.dir);
  const again = after.capabilities.find((x) => x.id === 'demo.echo')!;
  t.like(again.globalPerMin, { used: 3 }, 'the minute window carried over the restart');
  t.deepEqual(again.callers, echo.callers);
  t.true(after.uptimeMs >= 0);
  // A minute later the minute windows are empty, the day windows are not.
  net.clock.advance(61_000);
  const later = (await status(p.dir)).capabilities.find((x) => x.id === 'demo.echo')!;
  t.like(later.globalPerMin, { used: 0 });
  t.like(later.callers[0], { perMin: { used: 0 }, perDay: { used: 3 } });
  const text = await runCli(['status', '--data', p.dir]);
  t.regex(text.stdout, /^daemon {5}running, pid \d+, up /m);
  t.regex(text.stdout, /^ {2}demo\.echo {2}in flight 0\/16 \(1 per caller\), all callers 0\/1200 this minute$/m);
  t.regex(text.stdout, new RegExp(`^ {4}${c.aid} {2}0/60 this minute, 3/2000 today$`, 'm'));
  await caller.close();
});
