// The provider's admission of one free call, for tests that hold an actor host of their own: the node
// owns one Gates for its lifetime (src/node/provider/calls.ts); here each host gets one, so concurrent
// admissions on the same host share a gate as they do in a node, and a restarted host starts afresh.
import type { ActorHost } from '../../src/runtime/host.js';
import { admit as admitWith, type Admission } from '../../src/node/provider/slots.js';
import { Gates } from '../../src/node/provider/gate.js';
import type { CallIn, CheckParts } from '../../src/node/provider/checks.js';
import { quotaIds } from '../../src/actors/bucket.js';
import { inflightId } from '../../src/actors/inflight.js';

export type { Admission, CallIn };

const gates = new WeakMap<ActorHost, Gates>();

export function admit(parts: CheckParts & { host: ActorHost }, call: CallIn): Promise<Admission> {
  const held = gates.get(parts.host) ?? new Gates();
  gates.set(parts.host, held);
  return admitWith({ ...parts, gates: held }, call);
}

/** The actor ids of one capability's quota windows (for a caller) and its in-flight count. */
export const actors = (capability: string, caller: string) => ({ ...quotaIds(capability, caller), inflight: inflightId(capability) });
