// The version rule. The journal stores commands (ADMIT, START) and replay and start-up recompute their
// outcomes with the kind's machine, so a kind's transitions are part of the data format. Each kind in
// kinds.ts declares the `version` of its transitions; every journal entry and snapshot written carries
// the version of its kind, and those written before versions existed carry none: they are version 1.
// An entry or snapshot of a version this build does not have (a newer anet wrote it, or the kind's
// version was raised since) is never recomputed: replay and start-up refuse with one line saying what,
// where, and what to do. Changing a kind's transitions means a new kind name with the old kind kept,
// frozen (`card-fetch` beside `card-fetch-v2`: older journals then still replay), or, when data of the
// old transitions need not be read any more, a higher `version`.
import type { ActorKind } from './kinds.js';

/** The version an entry or snapshot was written with (none: written before versions, version 1). */
export function versionOf(record: { version?: number }): number {
  return record.version ?? 1;
}

/** An entry or snapshot this build cannot recompute: its kind or its kind's version is not this build's. */
export class UnknownVersionError extends Error {
  override name = 'UnknownVersionError';
  constructor(
    readonly dataDir: string,
    /** What holds it, e.g. `journal entry #12 (actor b:0)`. */
    readonly what: string,
    readonly kind: string,
    readonly version: number,
    /** The version this build has of the kind; null when it has no such kind. */
    readonly known: number | null,
  ) {
    const have = known === null ? 'which this anet does not know' : `and this anet has version ${known} of it only`;
    super(
      `${what} is version ${version} of actor kind "${kind}", ${have}: it was not recomputed; ` +
        `run the anet version that wrote ${dataDir} (a newer one, or the one before this kind changed)`,
    );
  }
}

/**
 * The kind of `record` (an entry or a snapshot), when this build has it at the record's version; else
 * undefined (the caller refuses it with UnknownVersionError.about). Called for every entry replayed: no
 * message is built unless one is needed.
 */
export function kindAt(kinds: Record<string, ActorKind>, record: { kind: string; version?: number }): ActorKind | undefined {
  const kind = kinds[record.kind];
  return kind !== undefined && kind.version === versionOf(record) ? kind : undefined;
}

/** The refusal of `record`, which `kindAt` did not find; `what` names it. */
export function unknownVersion(
  kinds: Record<string, ActorKind>,
  record: { kind: string; version?: number },
  what: string,
  dataDir: string,
): UnknownVersionError {
  const kind = kinds[record.kind];
  return new UnknownVersionError(dataDir, what, record.kind, versionOf(record), kind ? kind.version : null);
}
