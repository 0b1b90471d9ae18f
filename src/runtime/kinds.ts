// The machines the runtime hosts, by kind name. Each names the deadline in its context, if any, so the
// host can arm (and after a restart re-arm) one timer for it; machines never use xstate `after`.
import type { AnyStateMachine, SnapshotFrom } from 'xstate';
import { bucketMachine, upgradeBucketContext, comparableBucketContext, type BucketContext } from '../../machines/bucket.js';
import { inflightMachine } from '../../machines/inflight.js';
import { cardFetchMachine, type CardFetchContext } from '../../machines/card-fetch.js';
import { callMachine, callDeadline, type CallContext } from '../../machines/call.js';
import { paymentMachine, type PaymentContext } from '../../machines/payment.js';
import { spendMachine } from '../../machines/spend.js';

export interface ActorKind {
  machine: AnyStateMachine;
  deadline(snapshot: SnapshotFrom<AnyStateMachine>): number | null;
  /** Turns a stored context of an earlier version into the current shape (see restoreSnapshot). */
  upgrade?(context: unknown): unknown;
  /** The form of a context (of any version) that replay's verify compares, when it is not the context itself. */
  comparable?(context: unknown): unknown;
}

export const KINDS: Record<string, ActorKind> = {
  bucket: { machine: bucketMachine, deadline: (s) => (s.context as BucketContext).deadline, upgrade: upgradeBucketContext, comparable: comparableBucketContext },
  inflight: { machine: inflightMachine, deadline: () => null },
  call: { machine: callMachine, deadline: (s) => callDeadline(s.value, s.context as CallContext) },
  payment: { machine: paymentMachine, deadline: (s) => (s.context as PaymentContext).deadline },
  spend: { machine: spendMachine, deadline: () => null },
  'card-fetch': { machine: cardFetchMachine, deadline: (s) => (s.context as CardFetchContext).deadline },
  // The provider's card-request reply limiter (SPEC §6.2: 6 per sender per 60 s, then no answer) is an
  // exact sliding window: the bucket machine with input { limit: 6, windowMs: 60000 }.
  'reply-limiter': { machine: bucketMachine, deadline: (s) => (s.context as BucketContext).deadline, upgrade: upgradeBucketContext, comparable: comparableBucketContext },
};

export const REPLY_LIMIT = { limit: 6, windowMs: 60_000 } as const;
