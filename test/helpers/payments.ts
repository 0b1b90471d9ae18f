// Payments in tests: credits minted by the hub's own identity, balances read as a node's operator would,
// and a provider whose sample service counts how often it really ran.
import type { ExecutionContext } from 'ava';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { startNet, type Net } from './net.js';
import { runCli } from './cli.js';
import { startSampleService, echoHandler, type SampleHandler } from '../../src/service/sample.js';
import { HubClient } from '../../src/hub-client/client.js';
import { loadIdentity } from '../../src/identity/store.js';

export async function mint(net: Net, aid: string, amount: string): Promise<void> {
  const hubIdentity = await loadIdentity(join(net.root, 'hub'));
  await new HubClient(net.hub.url, hubIdentity, () => net.clock.now()).mint(aid, amount, randomBytes(16).toString('hex'));
}

export async function balanceOf(dir: string): Promise<{ balance: string; held: string }> {
  const r = await runCli(['balance', '--json', '--data', dir]);
  if (r.code !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout);
}

/** A provider serving `caps` (id, price) from one sample service on a Unix socket. */
export async function pricedProvider(
  t: ExecutionContext,
  net: Net,
  caps: { id: string; price?: number }[],
  handler: SampleHandler = echoHandler,
  name = 'p',
) {
  const run = join(net.root, `run-${name}`);
  await mkdir(run, { mode: 0o700 });
  let ran = 0;
  const service = await startSampleService(join(run, 'svc.sock'), (body, req, res) => {
    ran++;
    return handler(body, req, res);
  });
  t.teardown(() => service.close());
  const config = {
    inbound: { policy: 'open', public_capabilities: caps.map((c) => ({ id: c.id })) },
    modules: {
      service: {
        capabilities: caps.map((c) => ({ id: c.id, url: `unix://${service.socketPath}`, ...(c.price ? { price: c.price } : {}) })),
      },
    },
  };
  const p = await net.node(name, config);
  return { ...p, config, ran: () => ran };
}

/**
 * A provider of `caps` and a caller `c` (with `caller` config), both daemons running on one hub, and
 * `credits` minted to the caller when given.
 */
export async function market(
  t: ExecutionContext,
  caps: { id: string; price?: number }[],
  opts: { handler?: SampleHandler; caller?: Record<string, unknown>; credits?: string } = {},
) {
  const net = await startNet(t);
  const p = await pricedProvider(t, net, caps, opts.handler);
  const c = await net.node('c', opts.caller ?? {});
  const provider = await net.start(p.dir);
  const caller = await net.start(c.dir);
  if (opts.credits) await mint(net, c.aid, opts.credits);
  return { net, p, c, provider, caller };
}
