// The machines the runtime hosts, by kind name. Each names the deadline in its context, if any, so the
// host can arm (and after a restart re-arm) one timer for it; machines never use xstate `after`.
import type { AnyStateMachine, SnapshotFrom } from 'xstate';
import { bucketMachine, upgradeBucketContext, comparableBucketContext, type BucketContext } from '../../machines/bucket.js';
import { inflightMachine } from '../../machines/inflight.js';
import { cardFetchMachine, type CardFetchContext } from '../../machines/card-fetch.js';
import { cardFetchMachineV1, type CardFetchV1Context } from '../../machines/card-fetch-v1.js';
import { callMachine, callDeadline, type CallContext } from '../../machines/call.js';
import { paymentMachine, type PaymentContext } from '../../machines/payment.js';
import { spendMachine } from '../../machines/spend.js';

export interface ActorKind {
  machine: AnyStateMachine;
  /**
   * The version of this kind's transitions, carried by every journal entry and snapshot written
   * (versions.ts: the rule, and what changing a kind's transitions takes). Today's machines are 1.
   */
  version: number;
  deadline(snapshot: SnapshotFrom<AnyStateMachine>): number | null;
  /** Turns a stored context of an earlier version into the current shape (see restoreSnapshot). */
  upgrade?(context: unknown): unknown;
  /** The form of a context (of any version) that replay's verify compares, when it is not the context itself. */
  comparable?(context: unknown): unknown;
}

export const KINDS: Record<string, ActorKind> = {
  bucket: {
    machine: bucketMachine,
    version: 1,
    deadline: (s) => (s.context as BucketContext).deadline,
    upgrade: upgradeBucketContext,
    comparable: comparableBucketContext,
  },
  inflight: { machine: inflightMachine, version: 1, deadline: () => null },
  call: { machine: callMachine, version: 1, deadline: (s) => callDeadline(s.value, s.context as CallContext) },
  payment: { machine: paymentMachine, version: 1, deadline: (s) => (s.context as PaymentContext).deadline },
  spend: { machine: spendMachine, version: 1, deadline: () => null },
  // The reader's extended-card fetch (SPEC §6.2). A kind's transitions are part of the journal's format:
  // when they change, the machine gets a new kind and the old one stays, frozen, so that older journals
  // replay and verify exactly (and their pending deadlines still fire). `card-fetch` is the first
  // version (its 60 s guard a condition, not a state); new actors are `card-fetch-v2`.
  'card-fetch': { machine: cardFetchMachineV1, version: 1, deadline: (s) => (s.context as CardFetchV1Context).deadline },
  'card-fetch-v2': { machine: cardFetchMachine, version: 1, deadline: (s) => (s.context as CardFetchContext).deadline },
  // The provider's card-request reply limiter (SPEC §6.2: 6 per sender per 60 s, then no answer) is an
  // exact sliding window: the bucket machine with input { limit: 6, windowMs: 60000 }.
  'reply-limiter': {
    machine: bucketMachine,
    version: 1,
    deadline: (s) => (s.context as BucketContext).deadline,
    upgrade: upgradeBucketContext,
    comparable: comparableBucketContext,
  },
};

export const REPLY_LIMIT = { limit: 6, windowMs: 60_000 } as const;
