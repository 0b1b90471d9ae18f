// WIRE.md §4: envelopes — the hub sees only the recipient and a padded size; the receiver refuses a bad
// signature, another recipient, an expired message, a lifetime over 15 minutes, a replayed mid and
// unknown inner keys below 64.
import test from 'ava';
import { encode } from 'cborg';
import { encodeCanonical, decodeCanonical, type CborValue } from '../../src/identity/cbor.js';
import {
  sealEnvelope,
  openEnvelope,
  envelopeRecipient,
  EnvelopeRefused,
  MAX_MESSAGE_TTL_MS,
  type OpenContext,
} from '../../src/protocol/envelope.js';
import { generateX25519, seal } from '../../src/protocol/hpke.js';
import { testIdentity } from '../helpers/identity.js';
import { codeOfAsync } from '../helpers/errors.js';

const alice = testIdentity('env-alice', 1);
const bob = testIdentity('env-bob');
const bobKey = generateX25519();
const kid = new Uint8Array(16).fill(7);
const NOW = 1_800_000_000_000;
const sender = { aid: alice.kel.aid, ksn: alice.kel.ksn, signer: alice.keys[alice.kel.ksn]! };
const to = { aid: bob.kel.aid, kid, publicKey: bobKey.publicKey };
const msg = (body: CborValue = 'hello', exp = NOW + 60_000) => ({ type: 'task.send', ix: 0, ts: NOW, exp, body });

function context(overrides: Partial<OpenContext> = {}): OpenContext {
  const seen = new Set<string>();
  return {
    me: bob.kel.aid,
    keys: new Map([[Buffer.from(kid).toString('hex'), bobKey]]),
    now: NOW,
    seen: (mid) => {
      const k = Buffer.from(mid).toString('hex');
      const had = seen.has(k);
      seen.add(k);
      return had;
    },
    kelOf: (aid) => (aid === alice.kel.aid ? alice.kel : null),
    ...overrides,
  };
}

const refusal = (fn: () => Promise<unknown>) => codeOfAsync(fn, EnvelopeRefused);

/** An envelope to bob around inner bytes crafted by hand (sealEnvelope would make them well-formed). */
function sealedToBob(inner: Uint8Array): Uint8Array {
  const info = encodeCanonical(
    new Map<number, CborValue>([
      [1, 'anet-relay/v1'],
      [2, bob.kel.aid],
      [3, 1],
      [4, kid],
    ]),
  );
  const { enc, ct } = seal(bobKey.publicKey, info, new Uint8Array(), inner);
  return encodeCanonical(
    new Map<number, CborValue>([
      [1, 1],
      [2, bob.kel.aid],
      [3, 1],
      [4, kid],
      [5, enc],
      [6, ct],
    ]),
  );
}

test('WIRE §4: a sealed envelope opens with its fields; the outside shows only the recipient and a padded size', async (t) => {
  const { bytes, mid } = sealEnvelope(sender, to, msg(new Map([['capability', 'echo']])));
  const got = await openEnvelope(bytes, context());
  t.like(got, { from: alice.kel.aid, ksn: 1, to: bob.kel.aid, type: 'task.send', ix: 0, ts: NOW });
  t.deepEqual(got.mid, mid);
  t.deepEqual(got.body, new Map([['capability', 'echo']]));
  t.is(envelopeRecipient(bytes), bob.kel.aid);
  const outer = decodeCanonical(bytes) as Map<number, CborValue>;
  t.deepEqual([...outer.keys()], [1, 2, 3, 4, 5, 6]);
  t.false(Buffer.from(bytes).includes(Buffer.from(alice.kel.aid)), 'the sender is only inside the ciphertext');
  const small = (decodeCanonical(sealEnvelope(sender, to, msg('x')).bytes) as Map<number, Uint8Array>).get(6)!.length;
  const larger = (decodeCanonical(sealEnvelope(sender, to, msg('y'.repeat(4))).bytes) as Map<number, Uint8Array>).get(6)!.length;
  t.is(small, larger, 'sizes are padded');
  t.true(small - 16 >= 256 && Number.isInteger(Math.log2(small - 16)), `a power of two plus the tag: ${small}`);
});

test('WIRE §4: the receiver refuses another recipient, expiry, replay, an unknown kid and tampering', async (t) => {
  const { bytes } = sealEnvelope(sender, to, msg());
  const ctx = context();
  t.is(await refusal(() => openEnvelope(bytes, ctx)), 'accepted');
  t.is(await refusal(() => openEnvelope(bytes, ctx)), 'REPLAYED');
  t.is(await refusal(() => openEnvelope(bytes, context({ me: alice.kel.aid }))), 'NOT_FOR_ME');
  t.is(await refusal(() => openEnvelope(sealEnvelope(sender, to, msg('late', NOW)).bytes, context())), 'EXPIRED');
  // A lifetime past 7 days (the hub's mailbox TTL) would make the replay guard remember its mid for as long: refused.
  t.is(
    await refusal(() => openEnvelope(sealEnvelope(sender, to, msg('forever', NOW + MAX_MESSAGE_TTL_MS + 60_000)).bytes, context())),
    'BAD_TIME',
  );
  t.is(
    await refusal(() => openEnvelope(sealEnvelope(sender, to, { ...msg(), ts: NOW + 6 * 60_000, exp: NOW + 7 * 60_000 }).bytes, context())),
    'BAD_TIME',
  );
  t.is(await refusal(() => openEnvelope(bytes, context({ keys: new Map() }))), 'UNKNOWN_KID');
  const outer = decodeCanonical(bytes) as Map<number, CborValue>;
  const ct = outer.get(6) as Uint8Array;
  const tampered = encodeCanonical(new Map([...outer, [6, Uint8Array.from(ct, (b, i) => (i === 5 ? b ^ 1 : b))]]));
  t.is(await refusal(() => openEnvelope(tampered, context())), 'UNDECRYPTABLE');
  // Keys out of CoreDet order: the hub still reads the recipient (it checks no more), the receiver refuses.
  const reordered = encode(new Map([...outer].reverse()), { mapSorter: () => 0 });
  t.notDeepEqual(reordered, bytes);
  t.is(envelopeRecipient(reordered), bob.kel.aid);
  t.is(await refusal(() => openEnvelope(reordered, context())), 'MALFORMED');
  t.is(await refusal(() => openEnvelope(bytes, context({ kelOf: () => null }))), 'UNKNOWN_SENDER');
});

test("WIRE §4: a signature by another key, or by the sender's rotated-away key, is refused", async (t) => {
  const mallory = testIdentity('env-mallory');
  const forged = sealEnvelope({ aid: alice.kel.aid, ksn: 1, signer: mallory.keys[0]! }, to, msg());
  t.is(await refusal(() => openEnvelope(forged.bytes, context())), 'BAD_SIGNATURE');
  const stale = sealEnvelope({ aid: alice.kel.aid, ksn: 0, signer: alice.keys[0]! }, to, msg());
  t.is(await refusal(() => openEnvelope(stale.bytes, context())), 'BAD_SIGNATURE');
});

test('WIRE §4: unknown inner keys below 64 are refused; keys from 64 up are extensions and ignored', async (t) => {
  const craft = (extra: number) => {
    const inner = new Map<number, CborValue>([
      [1, alice.kel.aid],
      [2, 1],
      [3, bob.kel.aid],
      [4, 'task.send'],
      [5, 0],
      [6, new Uint8Array(16).fill(extra % 256)],
      [7, NOW],
      [8, NOW + 1000],
      [9, 'x'],
      [extra, 'extension'],
    ]);
    const sig = alice.keys[1]!.sign(encodeCanonical(inner));
    return sealedToBob(encodeCanonical(new Map([...inner, [20, sig]])));
  };
  t.is(await refusal(() => openEnvelope(craft(30), context())), 'UNKNOWN_FIELD');
  t.is(await refusal(() => openEnvelope(craft(70), context())), 'accepted');
});

test("WIRE §4: every body size pads to exactly a power of two, including where the pad's header grows", async (t) => {
  const sizes = new Set<number>();
  for (let n = 0; n < 1200; n++) {
    const { bytes } = sealEnvelope(sender, to, msg('x'.repeat(n)));
    const ct = (decodeCanonical(bytes) as Map<number, Uint8Array>).get(6)!;
    sizes.add(ct.length - 16);
    const opened = await openEnvelope(bytes, context());
    if (opened.body !== 'x'.repeat(n)) return t.fail(`body of ${n} bytes did not survive`);
  }
  for (const size of sizes) t.true(size >= 256 && Number.isInteger(Math.log2(size)), `padded size ${size}`);
  t.true(sizes.size >= 3);
});

test('WIRE §4: the signature covers every inner key but 20 and 21 — extensions too, beside any pad, however many keys', async (t) => {
  const craft = (extensions: [number, CborValue][], pad: number | null, signExtensions = true) => {
    const known: [number, CborValue][] = [
      [1, alice.kel.aid],
      [2, 1],
      [3, bob.kel.aid],
      [4, 'task.send'],
      [5, 0],
      [6, new Uint8Array(16).fill(pad ?? 1)],
      [7, NOW],
      [8, NOW + 1000],
      [9, 'x'],
    ];
    const sig = alice.keys[1]!.sign(encodeCanonical(new Map([...known, ...(signExtensions ? extensions : [])])));
    const inner = new Map<number, CborValue>([
      ...known,
      ...extensions,
      [20, sig],
      ...(pad === null ? [] : [[21, new Uint8Array(pad)] as [number, CborValue]]),
    ]);
    return sealedToBob(encodeCanonical(inner));
  };
  const many = Array.from({ length: 30 }, (_, i) => [64 + i * 97, i % 2 ? new Uint8Array(i * 20) : `ext ${i}`] as [number, CborValue]);
  for (const pad of [null, 0, 23, 24, 255, 256, 70_000]) {
    t.is(await refusal(() => openEnvelope(craft([[70, 'extension']], pad), context())), 'accepted', `pad ${pad}`);
    t.is(await refusal(() => openEnvelope(craft(many, pad), context())), 'accepted', `30 extensions, pad ${pad}`);
    t.is(
      await refusal(() => openEnvelope(craft([[70, 'extension']], pad, false), context())),
      'BAD_SIGNATURE',
      `unsigned extension, pad ${pad}`,
    );
  }
});
