// SPEC §4, §4.1: inbound decisions for capability calls in the spec's order, every admission check with
// its reason, exact retry_after_ms, quotas that survive a restart, and concurrency under 50 callers —
// on a real actor host over a real LevelDB store, with a clock the test drives.
import test, { type ExecutionContext } from 'ava';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { tempDir } from '../helpers/tmp.js';
import { validateConfig } from '../../src/config/load.js';
import { Store } from '../../store/db.js';
import { ActorHost } from '../../src/runtime/host.js';
import { ManualClock } from '../../src/runtime/clock.js';
import { admit, type Admission } from '../../src/node/provider/slots.js';
import { Gates } from '../../src/node/provider/gate.js';
import type { CallIn } from '../../src/node/provider/checks.js';
import { quotaIds } from '../../src/actors/bucket.js';
import { inflightId } from '../../src/actors/inflight.js';
import { stampsOf, type BucketContext } from '../../machines/bucket.js';
import { testIdentity } from '../helpers/identity.js';

// Real AIDs: the peer lists keep only well-formed ones.
const [A, B, C] = ['adm-a', 'adm-b', 'adm-c'].map((tag) => testIdentity(tag).kel.aid) as [string, string, string];
const PNG = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex');

function config(policy: 'open' | 'closed', caps: Record<string, unknown>[]) {
  const r = validateConfig({
    inbound: { policy, public_capabilities: caps },
    modules: { service: { capabilities: caps.map((c) => ({ id: c.id, url: `unix:///run/anet-test/${c.id}.sock` })) } },
  });
  if (!r.config) throw new Error(JSON.stringify(r.problems));
  return r.config;
}

async function node(t: ExecutionContext, policy: 'open' | 'closed', caps: Record<string, unknown>[]) {
  const dataDir = await tempDir(t);
  const clock = new ManualClock(1_800_000_000_000);
  let store = await Store.open(dataDir);
  let host = await ActorHost.start(store, { clock });
  // The node owns one Gates for its lifetime (src/node/provider/calls.ts): concurrent admissions share it.
  let gates = new Gates();
  t.teardown(async () => {
    await host.close();
    await store.close();
  });
  const n = {
    dataDir,
    clock,
    config: config(policy, caps),
    get host() {
      return host;
    },
    calls: 0,
    call(from: string, capability: string, args: unknown = {}, files?: CallIn['files']): Promise<Admission> {
      return admit(
        { dataDir, config: n.config, host, gates },
        { id: `c${++n.calls}`, from, capability, args, ...(files ? { files } : {}) },
      );
    },
    async restart() {
      await host.close();
      await store.close();
      store = await Store.open(dataDir);
      host = await ActorHost.start(store, { clock });
      gates = new Gates();
    },
  };
  return n;
}

/** The actor ids of one capability's quota windows (for a caller) and its in-flight count. */
const actors = (capability: string, caller: string) => ({ ...quotaIds(capability, caller), inflight: inflightId(capability) });

/** The outcome's reason; an admitted call is released at once (it ran instantly). */
const reasonOf = async (p: Admission | Promise<Admission>) => {
  const a = await p;
  if (!a.admitted) return a.reason;
  await a.release();
  return 'admitted';
};

test('SPEC §4: deny first; an unknown id, a hidden one and allow_only for a stranger get one identical reply', async (t) => {
  for (const policy of ['open', 'closed'] as const) {
    const n = await node(t, policy, [{ id: 'text.echo' }, { id: 'secret.tool', allow_only: true }]);
    const expected = policy === 'open' ? 'capability_not_public' : 'not_accepting';
    const unknown = await n.call(A, 'no.such');
    const hidden = await n.call(A, 'secret.tool');
    t.deepEqual(hidden, unknown, `${policy}: byte for byte the same refusal`);
    t.deepEqual(JSON.stringify(hidden), JSON.stringify({ admitted: false, reason: expected }));
    t.is(await reasonOf(await n.call(A, 'text.echo')), 'admitted', 'a public capability is callable by anyone');
    await writeFile(join(n.dataDir, 'peers.allow'), `${B}\n`);
    t.is(await reasonOf(await n.call(B, 'secret.tool')), 'admitted', 'a listed peer may call allow_only');
    await writeFile(join(n.dataDir, 'peers.deny'), `${A}\n${B}\n`);
    t.deepEqual(await n.call(A, 'text.echo'), { admitted: false, reason: 'not_accepting' }, 'denied, whatever the policy');
    t.deepEqual(await n.call(B, 'secret.tool'), { admitted: false, reason: 'not_accepting' }, 'deny wins over allow');
  }
});

test('SPEC §4.1: argument checks — size (UTF-8 JSON bytes), not an object, a top-level $ key', async (t) => {
  const n = await node(t, 'closed', [{ id: 'text.echo', max_args_bytes: 20, per_caller_per_min: 100 }]);
  // {"t":"éééééé"} is 14 characters and exactly 20 bytes: the limit is inclusive and counts bytes.
  t.is(await reasonOf(await n.call(A, 'text.echo', { t: 'é'.repeat(6) })), 'admitted');
  t.like(await n.call(A, 'text.echo', { t: 'é'.repeat(7) }), { admitted: false, reason: 'args_too_large' }, '15 characters, 22 bytes');
  t.like(await n.call(A, 'text.echo', [1, 2]), { admitted: false, reason: 'bad_args' });
  t.like(await n.call(A, 'text.echo', 'text'), { admitted: false, reason: 'bad_args' });
  t.like(await n.call(A, 'text.echo', null), { admitted: false, reason: 'bad_args' });
  t.like(await n.call(A, 'text.echo', { $where: 1 }), { admitted: false, reason: 'bad_args' });
  t.is(await reasonOf(await n.call(A, 'text.echo', { a: { $nested: 1 } })), 'admitted', 'only top-level keys matter');
});

test('SPEC §4.1, §3: files — none declared, 9 files, one too large, bad base64, and a PNG claimed as text', async (t) => {
  const n = await node(t, 'closed', [
    { id: 'img.resize', per_caller_per_min: 100, files: { max_count: 8, max_bytes: 64, media_types: ['image/*'] } },
    { id: 'text.read', per_caller_per_min: 100, files: { media_types: ['text/plain'] } },
    { id: 'text.echo', per_caller_per_min: 100 },
  ]);
  const png = { name: 'a.png', mime: 'image/png', data_b64: PNG.toString('base64') };
  const ok = await n.call(A, 'img.resize', {}, [png]);
  t.true(ok.admitted);
  t.deepEqual(ok.admitted && ok.files, [{ name: 'a.png', mime: 'image/png', data_b64: png.data_b64 }]);
  if (ok.admitted) await ok.release();
  const detail = async (cap: string, files: CallIn['files']) => {
    const r = await n.call(A, cap, {}, files);
    return r.admitted ? 'admitted' : `${r.reason}: ${r.detail}`;
  };
  t.regex(await detail('text.echo', [png]), /^files_not_accepted: this capability takes no files/);
  t.regex(await detail('img.resize', Array(9).fill(png)), /^files_not_accepted: 9 files; at most 8/);
  t.regex(
    await detail('img.resize', [{ ...png, data_b64: Buffer.concat([PNG, Buffer.alloc(60)]).toString('base64') }]),
    /^files_not_accepted: file 1 \(a.png\): 89 bytes; at most 64/,
  );
  t.regex(await detail('img.resize', [{ ...png, data_b64: 'iVBORw0KGgo' }]), /not standard padded base64/);
  t.regex(await detail('img.resize', [{ ...png, data_b64: `${PNG.toString('base64url')}_` }]), /not standard padded base64/);
  // The node reads the bytes itself: a PNG claimed as text is refused by a text-only capability.
  t.regex(
    await detail('text.read', [{ name: 'notes.txt', mime: 'text/plain', data_b64: PNG.toString('base64') }]),
    /detected image\/png, not one of text\/plain/,
  );
});

test('SPEC §4.1, §2.1: quotas refuse with the exact retry_after_ms, consume nothing when refused, and survive a restart', async (t) => {
  const n = await node(t, 'closed', [{ id: 'text.echo', per_caller_per_min: 2, per_caller_per_day: 3, global_per_min: 3 }]);
  const t0 = n.clock.now();
  t.is(await reasonOf(await n.call(A, 'text.echo')), 'admitted');
  await n.clock.advanceTo(t0 + 10_000);
  t.is(await reasonOf(await n.call(A, 'text.echo')), 'admitted');
  await n.clock.advanceTo(t0 + 15_000);
  t.like(await n.call(A, 'text.echo'), { admitted: false, reason: 'quota_caller_per_min', retryAfterMs: 45_000 });
  // Restarting gives no more.
  await n.restart();
  t.like(await n.call(A, 'text.echo'), { admitted: false, reason: 'quota_caller_per_min', retryAfterMs: 45_000 });
  await n.clock.advanceTo(t0 + 60_000);
  t.is(await reasonOf(await n.call(A, 'text.echo')), 'admitted', 'the oldest call left the window');
  // Global (3 a minute): B fills it; C is refused, and C's own window stays empty.
  await n.clock.advanceTo(t0 + 61_000);
  t.is(await reasonOf(n.call(B, 'text.echo')), 'admitted');
  t.like(await n.call(C, 'text.echo'), { admitted: false, reason: 'quota_global_per_min', retryAfterMs: 9_000 });
  const cMin = (await n.host.state(actors('text.echo', C).callerMin))!.context as BucketContext;
  t.deepEqual(stampsOf(cMin), [], 'a refused call consumes no quota');
  // A's day window (3) is full now, and says when it frees.
  await n.clock.advanceTo(t0 + 200_000);
  t.like(await n.call(A, 'text.echo'), { admitted: false, reason: 'quota_caller_per_day', retryAfterMs: 24 * 3_600_000 - 200_000 });
});

test('SPEC §4.1: max_inflight and per_caller_inflight under 50 parallel callers; slots come back on release', async (t) => {
  const n = await node(t, 'closed', [
    { id: 'text.echo', max_inflight: 5, per_caller_inflight: 1, per_caller_per_min: 100, global_per_min: 1000 },
  ]);
  const callers = Array.from({ length: 50 }, (_, i) => `bafyrei${String(i).padStart(52, 'c')}`);
  const results = await Promise.all(callers.map((c) => n.call(c, 'text.echo')));
  t.is(results.filter((r) => r.admitted).length, 5);
  t.true(results.filter((r) => !r.admitted).every((r) => !r.admitted && r.reason === 'max_inflight'));
  const running = results.filter((r) => r.admitted);
  const mine = running[0]!;
  // The same caller may not run a second one.
  const first = callers[results.indexOf(mine)]!;
  await Promise.all(running.slice(1).map((r) => r.admitted && r.release()));
  t.is(await reasonOf(await n.call(first, 'text.echo')), 'caller_inflight');
  const again = await Promise.all(Array.from({ length: 10 }, () => n.call(first, 'text.echo')));
  t.deepEqual(await Promise.all(again.map(reasonOf)), Array(10).fill('caller_inflight'));
  if (mine.admitted) await mine.release();
  t.is(await reasonOf(await n.call(first, 'text.echo')), 'admitted');
  // Refused calls took no quota: the first caller made 12 attempts and 2 were admitted.
  const stamps = stampsOf((await n.host.state(actors('text.echo', first).callerMin))!.context as BucketContext);
  t.is(stamps.length, 2);
});

test('SPEC §4.1: a call refused by its own window never holds a shared slot another caller needs', async (t) => {
  const n = await node(t, 'closed', [
    { id: 'text.echo', per_caller_per_min: 1, global_per_min: 2, max_inflight: 100, per_caller_inflight: 100 },
  ]);
  t.is(await reasonOf(n.call(A, 'text.echo')), 'admitted'); // A's own window is now full; one global slot is left
  for (let round = 0; round < 20; round++) {
    const [a, b] = await Promise.all([n.call(A, 'text.echo'), n.call(B, 'text.echo')]);
    t.like(a, { admitted: false, reason: 'quota_caller_per_min' });
    t.true(b.admitted, `round ${round}: B takes the last global slot`);
    if (b.admitted) await b.release(true); // give it back, so the next round starts the same
  }
});

test('SPEC §4.1: a call refused by its own window never holds the in-flight slot another caller needs, and every slot comes back', async (t) => {
  const n = await node(t, 'closed', [
    { id: 'text.echo', per_caller_per_min: 1, global_per_min: 1000, max_inflight: 1, per_caller_inflight: 1 },
  ]);
  t.is(await reasonOf(n.call(A, 'text.echo')), 'admitted'); // A's own window is now full
  for (let round = 0; round < 20; round++) {
    // A asks first: its START may take the only slot for a moment, until its window's refusal gives it back.
    const [a, b, c] = await Promise.all([n.call(A, 'text.echo'), n.call(B, 'text.echo'), n.call(A, 'text.echo')]);
    t.like(a, { admitted: false, reason: 'quota_caller_per_min' });
    t.like(c, { admitted: false, reason: 'quota_caller_per_min' });
    t.true(b.admitted, `round ${round}: B takes the only slot`);
    if (b.admitted) await b.release(true);
  }
  const slots = (await n.host.state(actors('text.echo', '').inflight))!.context as { running: Record<string, number> };
  t.deepEqual(slots.running, {}, 'no slot is left held');
  const aMin = (await n.host.state(actors('text.echo', A).callerMin))!.context as BucketContext;
  t.is(stampsOf(aMin).length, 1, 'the refused calls took nothing');
});
