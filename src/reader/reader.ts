// Reading other nodes' public cards (SPEC §6.4) without trusting the hub: each card is verified against
// the AID's KEL, which only ever moves forward (a shorter or forked copy from the hub is not accepted),
// and against the highest card seq seen (SEQ_ROLLBACK / SEQ_FORK survive restarts). `find` never
// contacts an agent: only the hub.
import type { Store } from '../../store/db.js';
import type { HubClient } from '../hub-client/client.js';
import { validateKel, compareKel, type KelState } from '../identity/kel.js';
import { verifyCard, type CardResult, type HighWater } from '../protocol/card/verify.js';
import { recordCard } from '../card/history.js';
import { KeyedSerial } from '../runtime/serial.js';
import { EXT_X402 } from '../protocol/card/constants.js';
import type { AgentCard } from '../protocol/card/types.js';

export const KEL_FRESH_MS = 24 * 3_600_000;

export type Charge = 'free' | 'some skills paid' | 'paid';
export type KeyState = 'confirmed' | 'stale' | 'invalid';

export interface PeerRecord {
  kel: Uint8Array;
  kelFetchedAt: number;
  highWater: { seq: string; digest: string } | null;
  duplicity?: { seq: number; known: string; other: string };
}

export interface ReadCard {
  aid: string;
  name: string;
  charge: Charge;
  key: KeyState;
  verified: boolean;
  code: string | null;
  card: AgentCard | null;
  skills: string[];
}

export function chargeOf(card: AgentCard | null): Charge {
  const x402 = card?.capabilities?.extensions?.find((e) => e.uri === EXT_X402);
  return !x402 ? 'free' : x402.required ? 'paid' : 'some skills paid';
}

function parseOrNull(wire: string): AgentCard | null {
  try {
    return JSON.parse(wire) as AgentCard;
  } catch {
    return null;
  }
}

/** A 'same' KEL refreshes the stored fetch time at most this often (every message carries the KEL). */
const REFRESH_WRITE_MS = 60_000;
const KEL_CACHE = 4096;

export class Reader {
  /** The last validated KEL bytes per AID: validation checks every event's signature, once. */
  private readonly validated = new Map<string, { bytes: Uint8Array; state: KelState }>();
  /** One read-modify-write of an AID's record at a time (messages are handled 32 at once). */
  private readonly serial = new KeyedSerial();

  constructor(
    private readonly store: Store,
    private readonly client: HubClient,
    private readonly now: () => number = Date.now,
  ) {}

  /** validateKel, remembered per AID for the bytes last seen; throws like validateKel. */
  private validate(aid: string, bytes: Uint8Array): KelState {
    const hit = this.validated.get(aid);
    if (hit && Buffer.from(hit.bytes.buffer, hit.bytes.byteOffset, hit.bytes.byteLength).equals(bytes)) return hit.state;
    const state = validateKel(bytes);
    if (this.validated.size >= KEL_CACHE) this.validated.clear();
    this.validated.set(aid, { bytes, state });
    return state;
  }

  /**
   * The KEL to verify with: the stored one unless the offered one extends it. `source` says who offered
   * it: only a copy from the hub counts as a refresh for the `key` column (a message's copy is read before
   * its signature is checked, so it may move the KEL forward — events are signed — but never vouch for
   * freshness). Callers hold the AID's lock.
   */
  private async kelFor(
    aid: string,
    offered: Uint8Array | null,
    source: 'hub' | 'peer',
  ): Promise<{ kel: KelState | 'invalid' | null; fresh: boolean; peer: PeerRecord | undefined }> {
    const peer = await this.peer(aid);
    let stored: KelState | undefined;
    if (peer) stored = this.validate(aid, peer.kel);
    let incoming: KelState | undefined;
    if (offered) {
      try {
        incoming = this.validate(aid, offered);
      } catch {
        incoming = undefined;
      }
    }
    if (peer?.duplicity) return { kel: 'invalid', fresh: false, peer };
    if (!stored) {
      if (!incoming) return { kel: offered ? 'invalid' : null, fresh: false, peer };
      if (incoming.aid !== aid) return { kel: 'invalid', fresh: false, peer };
      const created: PeerRecord = { kel: offered!, kelFetchedAt: source === 'hub' ? this.now() : 0, highWater: null };
      await this.savePeer(aid, created);
      return { kel: incoming, fresh: source === 'hub', peer: created };
    }
    const cmp = incoming ? compareKel(stored, incoming) : null;
    const wasFresh = this.now() - peer!.kelFetchedAt <= KEL_FRESH_MS;
    if (cmp?.kind === 'same' && (source === 'peer' || this.now() - peer!.kelFetchedAt < REFRESH_WRITE_MS)) {
      return { kel: stored, fresh: source === 'hub' || wasFresh, peer };
    }
    if (cmp?.kind === 'extension' || cmp?.kind === 'same') {
      const next = { ...peer!, kel: offered!, kelFetchedAt: source === 'hub' ? this.now() : peer!.kelFetchedAt };
      await this.savePeer(aid, next);
      return { kel: incoming!, fresh: source === 'hub' || wasFresh, peer: next };
    }
    if (cmp?.kind === 'duplicity') {
      const next = { ...peer!, duplicity: { seq: cmp.seq, known: cmp.known.id, other: cmp.other.id } };
      await this.savePeer(aid, next);
      return { kel: 'invalid', fresh: false, peer: next };
    }
    return { kel: stored, fresh: wasFresh, peer };
  }

  /**
   * The KEL of a peer to check a message with: the stored one, moved forward by `offered` when that
   * extends it; fetched from the hub when we hold none and none was offered. Null when no valid KEL is
   * known or the AID shows duplicity.
   */
  async kel(aid: string, offered: Uint8Array | null = null): Promise<KelState | null> {
    return this.serial.run(aid, async () => {
      let found = await this.kelFor(aid, offered, 'peer');
      if (found.kel === null && !offered) found = await this.kelFor(aid, await this.client.kel(aid).catch(() => null), 'hub');
      return found.kel === 'invalid' ? null : found.kel;
    });
  }

  /** The hub's copy of a peer's KEL, taken when it extends ours (a peer's key set is signed after a rotation). */
  async refreshKel(aid: string): Promise<KelState | null> {
    const offered = await this.client.kel(aid).catch(() => null);
    return this.serial.run(aid, async () => {
      const found = await this.kelFor(aid, offered, 'hub');
      return found.kel === 'invalid' ? null : found.kel;
    });
  }

  /** This process owns the store, so the records it wrote are kept in memory too (bounded). */
  private readonly peers = new Map<string, PeerRecord>();

  private async peer(aid: string): Promise<PeerRecord | undefined> {
    const hit = this.peers.get(aid);
    if (hit) return hit;
    const rec = (await this.store.peers.get(aid)) as PeerRecord | undefined;
    if (rec) this.cachePeer(aid, rec);
    return rec;
  }

  private cachePeer(aid: string, rec: PeerRecord): void {
    if (this.peers.size >= KEL_CACHE) this.peers.clear();
    this.peers.set(aid, rec);
  }

  private async savePeer(aid: string, rec: PeerRecord): Promise<void> {
    await this.store.peers.put(aid, rec);
    this.cachePeer(aid, rec);
  }

  /** Verifies one card as the hub served it, moves the high-water mark, records it for audit. */
  check(aid: string, wire: string, kelBytes: Uint8Array | null, name = ''): Promise<ReadCard & { result: CardResult }> {
    return this.serial.run(aid, () => this.checkLocked(aid, wire, kelBytes, name));
  }

  private async checkLocked(
    aid: string,
    wire: string,
    kelBytes: Uint8Array | null,
    name: string,
  ): Promise<ReadCard & { result: CardResult }> {
    const { kel, fresh, peer } = await this.kelFor(aid, kelBytes, 'hub');
    const hw: HighWater | null = peer?.highWater ? { seq: BigInt(peer.highWater.seq), digest: peer.highWater.digest } : null;
    const result = verifyCard(wire, { kel, now: this.now(), highWater: hw });
    const card: AgentCard | null = result.ok ? result.card : parseOrNull(wire);
    if (result.ok) {
      // A verified card means kelFor found or stored a KEL, so `peer` is set.
      if (!hw || result.seq > hw.seq)
        await this.savePeer(aid, { ...peer!, highWater: { seq: result.seq.toString(), digest: result.digest } });
      await recordCard(this.store, {
        aid,
        seq: result.seq.toString(),
        digest: result.digest,
        wire,
        source: `hub ${this.client.base}`,
        obtainedAt: this.now(),
      });
    }
    return {
      aid,
      name: name || card?.name || '',
      charge: chargeOf(card),
      key: !result.ok ? 'invalid' : fresh ? 'confirmed' : 'stale',
      verified: result.ok,
      code: result.ok ? null : result.code,
      card,
      skills: Array.isArray(card?.skills) ? card!.skills.map((s) => s.id) : [],
      result,
    };
  }

  async find(params: { q?: string; skill?: string; tag?: string; limit?: number }): Promise<ReadCard[]> {
    const { agents } = await this.client.search(params);
    const rows: ReadCard[] = [];
    for (const a of agents) {
      const { result: _r, ...row } = await this.check(a.aid, a.card, new Uint8Array(Buffer.from(a.kel, 'base64')), a.name);
      rows.push(row);
    }
    return rows;
  }

  async publicCard(aid: string): Promise<ReadCard> {
    const [wire, kel] = await Promise.all([this.client.card(aid), this.client.kel(aid).catch(() => null)]);
    const { result: _r, ...row } = await this.check(aid, wire, kel);
    return row;
  }
}
