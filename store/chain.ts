// The journal's integrity (issue 18, item 2): seq continuity plus a hash chain over the exact stored
// bytes of every entry. LevelDB checks nothing we can rely on when it reads (its write-ahead log reader
// drops a damaged record silently, table reads skip block checksums), so our own code does.
//
// Each event batch the host writes carries one link, in the same atomic LevelDB batch: the `chain`
// sublevel, keyed by the batch's last seq, holds `{from, h}` with
//   h = sha256(h of the link before, or 32 zero bytes for the first || stored bytes of entries from..to).
// The bytes are the msgpackr bytes as stored. msgpackr is not canonical and nothing it encodes is ever
// hashed for a *signature* (codec.ts); this hash is only a local check that our own stored bytes are the
// ones we wrote, so it is taken over the bytes as they are. One link per batch, not per entry: a
// createHash per entry cost ~2 µs, about 15% of an append on the bench machine; a batch's bytes hashed
// at once cost ~0.1 µs an entry. The price: a hash mismatch names the batch's first seq, not the entry.
//
// Upgrade: a journal written before the chain existed has no links. The chain starts at the first batch
// written by this version, recorded as meta `chain` (its first seq) in that batch; earlier entries are
// checked for continuity only. Nothing is computed over the old entries: hashing bytes that may already
// be damaged would vouch for them.
import { createHash, type Hash } from 'node:crypto';

export const ZERO_HASH = Buffer.alloc(32);

export interface Link {
  /** First seq of the batch; the key is its last. */
  from: number;
  to: number;
  h: Uint8Array;
}

export interface Damage {
  /** The first seq that is missing or damaged (for a batch whose hash differs: the batch's first). */
  seq: number;
  problem: string;
}

/** The node refuses to run on a damaged journal: one line with the data dir, the seq and what to do. */
export class JournalDamagedError extends Error {
  override name = 'JournalDamagedError';
  constructor(
    readonly dataDir: string,
    readonly damage: Damage,
  ) {
    super(
      `the journal in ${dataDir} is damaged from seq #${damage.seq} (${damage.problem}); acknowledged events are lost, so the node will not run on it: ` +
        `restore ${dataDir} from a backup made before the damage (\`anet replay --verify --data ${dataDir}\` names the first damaged seq)`,
    );
  }
}

/** The link of a batch whose journal values (stored bytes, in seq order) are `values`. */
export function linkHash(prev: Uint8Array, values: Uint8Array[]): Buffer {
  const hash = createHash('sha256').update(prev);
  for (const v of values) hash.update(v);
  return hash.digest();
}

/** Where a check starts: links after `to` must chain from `h`; entries from `to + 1` on are read. */
export interface Anchor {
  to: number;
  h: Uint8Array;
}

/**
 * Checks journal entries fed in seq order against the links, which come from `nextLinks` (a page at a
 * time). Entries before `chainFrom` (written before the chain existed) are checked for continuity only.
 * The first damage is kept in `damage`; feeding after it is harmless.
 */
export class ChainCheck {
  damage: Damage | null = null;
  private expected: number;
  private readonly links: Link[] = [];
  private linksDone = false;
  /** Entries the queued links cover past the entries fed so far. */
  private covered = 0;
  private link: Link | null = null;
  private hash: Hash | null = null;
  private prev: Uint8Array;

  constructor(
    anchor: Anchor,
    private readonly chainFrom: number | undefined,
    private readonly nextLinks: () => Promise<Link[]>,
  ) {
    this.expected = anchor.to + 1;
    this.prev = anchor.h;
  }

  /** Reads links ahead until they cover `entries` more entries (or run out), before a page is fed. */
  async prepare(entries: number): Promise<void> {
    while (!this.linksDone && this.covered < entries) {
      const page = await this.nextLinks();
      if (page.length === 0) this.linksDone = true;
      for (const l of page) {
        this.links.push(l);
        this.covered += l.to - l.from + 1;
      }
    }
  }

  private fail(seq: number, problem: string): void {
    this.damage ??= { seq, problem };
  }

  /** One entry, as decoded `seq` and stored `bytes`; a value that would not decode is `seq` undefined. */
  entry(seq: number | undefined, bytes: Uint8Array): void {
    if (this.damage) return;
    const expected = this.expected;
    if (seq !== expected) {
      if (seq === undefined) this.fail(expected, `entry #${expected} does not decode`);
      else if (seq > expected) this.fail(expected, `${entries(expected, seq - 1)} missing`);
      else this.fail(expected, `entry #${expected} holds seq ${seq}`);
      return;
    }
    this.expected++;
    if (this.chainFrom === undefined || seq < this.chainFrom) return;
    this.covered--;
    let link = this.link;
    if (link === null) {
      link = this.links.shift() ?? null;
      if (link === null) {
        this.fail(
          seq,
          `entry #${seq} is not covered by the hash chain (its link is lost, or it was written by something other than the node)`,
        );
        return;
      }
      if (link.from !== seq) {
        this.fail(Math.min(seq, link.from), `the hash chain's link for #${link.from}–#${link.to} does not start at #${seq}`);
        return;
      }
      this.link = link;
      this.hash = createHash('sha256').update(this.prev);
    }
    this.hash!.update(bytes);
    if (seq === link.to) {
      if (!this.hash!.digest().equals(link.h)) {
        const which =
          link.from === link.to
            ? `entry #${seq} does not match its hash`
            : `entries #${link.from}–#${link.to} (one batch) do not match their hash`;
        this.fail(link.from, which);
        return;
      }
      this.prev = link.h;
      this.link = null;
      this.hash = null;
    }
  }

  /** After the last entry: a link still open or links left over mean entries at the end are missing. */
  async end(): Promise<Damage | null> {
    if (this.damage) return this.damage;
    if (this.link) this.fail(this.expected, `${entries(this.expected, this.link.to)} missing (the end of a batch)`);
    else {
      await this.prepare(1);
      const next = this.links[0];
      if (next) this.fail(this.expected, `${entries(next.from, next.to)} missing (a whole batch)`);
    }
    return this.damage;
  }
}

const entries = (from: number, to: number) => (from === to ? `entry #${from} is` : `entries #${from}–#${to} are`);
