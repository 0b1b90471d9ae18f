// The machines the runtime hosts, by kind name. Each names the deadline in its context, if any, so the
// host can arm (and after a restart re-arm) one timer for it; machines never use xstate `after`.
import type { AnyStateMachine, SnapshotFrom } from 'xstate';
import { bucketMachine, type BucketContext } from '../../machines/bucket.js';
import { inflightMachine } from '../../machines/inflight.js';

export interface ActorKind {
  machine: AnyStateMachine;
  deadline(snapshot: SnapshotFrom<AnyStateMachine>): number | null;
}

export const KINDS: Record<string, ActorKind> = {
  bucket: { machine: bucketMachine, deadline: (s) => (s.context as BucketContext).deadline },
  inflight: { machine: inflightMachine, deadline: () => null },
};
