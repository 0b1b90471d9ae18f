// WIRE.md §1–2: deterministic CBOR, AIDs, strict Ed25519, KEL validation.
import test from 'ava';
import fc from 'fast-check';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { sha256 } from '@noble/hashes/sha2.js';
import { encode, rfc8949EncodeOptions } from 'cborg';
import { signerFromSeed, verify, type Signer } from '../src/identity/ed25519.js';
import {
  incept,
  rotate,
  eventBytes,
  encodeKel,
  decodeKel,
  validateKel,
  compareKel,
  signEvent,
  digestOfKey,
  KelError,
  type SignedEvent,
  type KelState,
} from '../src/identity/kel.js';
import { decodeCanonical, encodeCanonical } from '../src/identity/cbor.js';
import { isAid } from '../src/identity/cid.js';
import { codeOf } from './helpers/errors.js';

const enc = new TextEncoder();
const seedOf = (label: string) => sha256(enc.encode(label));

function buildKel(signers: Signer[], ts = 1_700_000_000_000): SignedEvent[] {
  const events = [incept(signers[0]!, signers[1]!.publicKey, ts)];
  let state = validateKel(events);
  for (let i = 1; i + 1 < signers.length; i++) {
    events.push(rotate(state, signers[i - 1]!, signers[i]!, signers[i + 1]!.publicKey, ts + i));
    state = validateKel(events);
  }
  return events;
}

const signersFor = (n: number, tag = 'k') => Array.from({ length: n }, (_, i) => signerFromSeed(seedOf(`${tag}/${i}`)));

const kelCode = (fn: () => unknown) => codeOf(fn, KelError);

test('WIRE §2 self-check vector: inception bytes and AID are reproduced exactly', async (t) => {
  // The spec's vector, kept in the repo so a clone without ../shared (as CI has) still checks it; when
  // the spec is beside the checkout, the copy must equal it.
  const text = await readFile(fileURLToPath(new URL('./fixtures/selfcheck.txt', import.meta.url)), 'utf8');
  const spec = await readFile(fileURLToPath(new URL('../../shared/spec/vectors/selfcheck.txt', import.meta.url)), 'utf8').catch(() => null);
  if (spec !== null) t.is(text, spec, "test/fixtures/selfcheck.txt is the spec's vector");
  const vector: Record<string, string> = Object.fromEntries(
    text
      .trim()
      .split('\n')
      .map((line) => line.split(' ') as [string, string]),
  );
  const want = (key: string): string => {
    const value = vector[key];
    if (!value) throw new Error(`selfcheck.txt has no ${key}`);
    return value;
  };
  const cur = signerFromSeed(seedOf('anet-selfcheck/cur'));
  const nxt = signerFromSeed(seedOf('anet-selfcheck/nxt'));
  const icp = incept(cur, nxt.publicKey, 0);
  t.is(Buffer.from(cur.publicKey).toString('hex'), want('cur_pub_hex'));
  t.is(Buffer.from(eventBytes(icp.event)).toString('hex'), want('icp_cbor_hex'));
  t.is(icp.id, want('aid'));
  t.is(validateKel([icp]).aid, want('aid'));
  t.true(isAid(icp.id));
});

test('WIRE §2: a valid KEL of random length validates, keeps its AID and tracks the current key', (t) => {
  fc.assert(
    fc.property(fc.integer({ min: 2, max: 8 }), fc.string({ maxLength: 8 }), (n, tag) => {
      const signers = signersFor(n, tag);
      const events = buildKel(signers);
      const state = validateKel(encodeKel(events));
      return (
        state.aid === events[0]!.id &&
        state.events.length === n - 1 &&
        state.ksn === n - 2 &&
        Buffer.compare(state.currentKey, signers[n - 2]!.publicKey) === 0 &&
        events.every((e) => e.event.seq === 0 || e.event.aid === state.aid)
      );
    }),
    { numRuns: 40 },
  );
  t.pass();
});

test('WIRE §2: every single-byte change anywhere in a KEL is refused', (t) => {
  const bytes = encodeKel(buildKel(signersFor(4, 'mutate')));
  t.is(
    kelCode(() => validateKel(bytes)),
    'accepted',
  );
  const accepted: number[] = [];
  for (let i = 0; i < bytes.length; i++) {
    for (const delta of [1, 0x80, 0xff]) {
      const copy = new Uint8Array(bytes);
      copy[i] = copy[i]! ^ delta;
      if (kelCode(() => validateKel(copy)) === 'accepted') accepted.push(i);
    }
  }
  t.deepEqual(accepted, [], 'mutated KELs that validated');
  fc.assert(
    fc.property(fc.nat({ max: bytes.length - 1 }), fc.integer({ min: 1, max: 255 }), (i, x) => {
      const copy = new Uint8Array(bytes);
      copy[i] = copy[i]! ^ x;
      return kelCode(() => validateKel(copy)) !== 'accepted';
    }),
    { numRuns: 2000 },
  );
});

test('WIRE §2: rules are refused with their codes (broken link, wrong next key, wrong signer, seq gap, wrong AID)', (t) => {
  const s = signersFor(5, 'rules');
  const events = buildKel(s);
  const base = validateKel(events.slice(0, 2));
  const resign = (e: SignedEvent, by: Signer) => signEvent(e.event, by);
  const third = events[2]!;

  const brokenLink = resign({ ...third, event: { ...third.event, prev: events[0]!.id } }, s[1]!);
  t.is(
    kelCode(() => validateKel([...events.slice(0, 2), brokenLink])),
    'BROKEN_LINK',
  );

  const intruder = signerFromSeed(seedOf('intruder'));
  const wrongNext = resign({ ...third, event: { ...third.event, keys: [intruder.publicKey] } }, s[1]!);
  t.is(
    kelCode(() => validateKel([...events.slice(0, 2), wrongNext])),
    'WRONG_NEXT_KEY',
  );

  // Signed by the new key instead of the previous one.
  t.is(
    kelCode(() => validateKel([...events.slice(0, 2), resign(third, s[2]!)])),
    'BAD_SIGNATURE',
  );
  // The inception signed by a key that is not its own.
  t.is(
    kelCode(() => validateKel([resign(events[0]!, intruder)])),
    'BAD_SIGNATURE',
  );

  const gap = resign({ ...third, event: { ...third.event, seq: 3 } }, s[1]!);
  t.is(
    kelCode(() => validateKel([...events.slice(0, 2), gap])),
    'SEQ_GAP',
  );
  t.is(
    kelCode(() => validateKel([events[0]!, events[2]!])),
    'SEQ_GAP',
  );

  const otherAid = signEvent({ ...third.event, aid: incept(intruder, s[0]!.publicKey, 1).id }, s[1]!);
  t.is(
    kelCode(() => validateKel([...events.slice(0, 2), otherAid])),
    'WRONG_AID',
  );

  t.is(
    kelCode(() => validateKel([{ ...third, id: events[0]!.id }])),
    'BAD_EVENT_ID',
  );
  t.is(
    kelCode(() => validateKel([])),
    'EMPTY',
  );
  t.is(base.events.length, 2);
});

test('WIRE §1: non-canonical CBOR is refused (unsorted keys, non-minimal integers)', (t) => {
  const events = buildKel(signersFor(3, 'canon'));
  const canonical = encodeKel(events);
  const reversed = encode(decodeCanonical(canonical), { mapSorter: (a: any, b: any) => (a[0].value < b[0].value ? 1 : -1) });
  t.notDeepEqual(reversed, canonical);
  t.is(
    kelCode(() => validateKel(reversed)),
    'NOT_CANONICAL',
  );
  // 0x18 0x02 is a non-minimal encoding of 2.
  const nonMinimal = Uint8Array.from([0xa1, 0x18, 0x02, 0x00]);
  t.throws(() => decodeCanonical(nonMinimal));
  // Trailing bytes after the KEL.
  t.not(
    kelCode(() => validateKel(Uint8Array.from([...canonical, 0x00]))),
    'accepted',
  );
  t.deepEqual(encodeCanonical(decodeCanonical(canonical)), canonical);
});

test("WIRE §1: encodeCanonical gives the bytes of cborg's RFC 8949 sorter for every key kind", (t) => {
  const scalarKey = fc.oneof(
    fc.integer({ min: -(2 ** 40), max: 2 ** 40 }),
    fc.bigInt({ min: -(2n ** 64n) + 1n, max: 2n ** 64n - 1n }),
    fc.string({ unit: 'grapheme', maxLength: 30 }),
    fc.uint8Array({ maxLength: 30 }),
    fc.boolean(),
    fc.constant(null),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
  );
  const { value } = fc.letrec((tie) => ({
    value: fc.oneof({ depthSize: 'small' }, scalarKey, fc.array(tie('value'), { maxLength: 4 }), tie('map')),
    map: fc
      .array(fc.tuple(fc.oneof(scalarKey, scalarKey, scalarKey, fc.array(scalarKey, { maxLength: 2 })), tie('value')), { maxLength: 8 })
      .map((entries) => new Map(entries)),
  }));
  // Bytes, or the error thrown (cborg's RFC 8949 sorter refuses to compare array and map keys).
  const outcome = (f: () => Uint8Array) => {
    try {
      return Buffer.from(f()).toString('hex');
    } catch (err) {
      return (err as Error).message;
    }
  };
  fc.assert(
    fc.property(value, (v) => outcome(() => encodeCanonical(v)) === outcome(() => encode(v, rfc8949EncodeOptions))),
    { numRuns: 2000 },
  );
  // Keys of different kinds and lengths, in the order RFC 8949 gives their encodings.
  const keys = new Map<unknown, number>([
    ['aa', 0],
    [-1, 0],
    ['b', 0],
    [24, 0],
    [new Uint8Array(2), 0],
    [23, 0],
    [-25, 0],
    [false, 0],
    [1.5, 0],
  ]);
  t.deepEqual(
    [...(decodeCanonical(encodeCanonical(keys)) as Map<unknown, unknown>).keys()],
    [23, 24, -1, -25, new Uint8Array(2), 'b', 'aa', false, 1.5],
  );
});

test('WIRE §2: Ed25519 verification is strict (S + L and non-canonical encodings refused)', (t) => {
  const s = signerFromSeed(seedOf('strict'));
  const msg = enc.encode('hello');
  const sig = s.sign(msg);
  t.true(verify(s.publicKey, msg, sig));
  const L = (1n << 252n) + 27742317777372353535851937790883648493n;
  let S = 0n;
  for (let i = 63; i >= 32; i--) S = (S << 8n) | BigInt(sig[i]!);
  const bumped = new Uint8Array(sig);
  let v = S + L;
  for (let i = 32; i < 64; i++) {
    bumped[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  t.false(verify(s.publicKey, msg, bumped), 'S + L is the same scalar but not canonical');
  const nonCanonicalKey = new Uint8Array(32).fill(0xff);
  nonCanonicalKey[31] = 0x7f; // y = 2^255 - 1 ≥ p
  t.false(verify(nonCanonicalKey, msg, sig));
  t.false(verify(s.publicKey, msg, sig.subarray(0, 63)));
  // A small-order key (here the identity point) would make one signature valid for every message.
  const identityPoint = new Uint8Array(32);
  identityPoint[0] = 1;
  const base = Buffer.from('5866666666666666666666666666666666666666666666666666666666666666', 'hex');
  const universal = Uint8Array.from([...base, 1, ...new Uint8Array(31)]);
  t.false(verify(identityPoint, msg, universal));
  const minusZero = new Uint8Array(identityPoint);
  minusZero[31] = 0x80; // x = 0 with the sign bit set: RFC 8032 §5.1.3 step 4 refuses it
  t.false(verify(minusZero, msg, universal));
  t.false(verify(s.publicKey, enc.encode('hellp'), sig));
});

test('WIRE §2: a second signed event at a known seq is duplicity, kept as evidence; shorter copies are refused', (t) => {
  const s = signersFor(4, 'dup');
  const events = buildKel(s);
  const known = validateKel(events);
  const atOne = validateKel(events.slice(0, 1));
  // The same previous key signs a different rotation at seq 1 (another next digest).
  const fork = rotate(atOne, s[0]!, s[1]!, signerFromSeed(seedOf('fork')).publicKey, 42);
  const forked = validateKel([events[0]!, fork]);
  const cmp = compareKel(known, forked);
  t.is(cmp.kind, 'duplicity');
  if (cmp.kind === 'duplicity') {
    t.is(cmp.seq, 1);
    t.is(cmp.known.id, events[1]!.id);
    t.is(cmp.other.id, fork.id);
  }
  t.is(compareKel(known, atOne).kind, 'shorter');
  t.deepEqual(compareKel(atOne, known), { kind: 'extension', added: 2 });
  t.is(compareKel(known, validateKel(decodeKel(encodeKel(events)))).kind, 'same');
  t.is(compareKel(known, validateKel(buildKel(signersFor(3, 'other')))).kind, 'other_aid');
});

test('WIRE §2: a rotated-away key can no longer sign as current', (t) => {
  const s = signersFor(4, 'rotated');
  const events = buildKel(s);
  const state: KelState = validateKel(events);
  t.is(state.ksn, 2);
  t.false(Buffer.compare(state.currentKey, s[0]!.publicKey) === 0);
  // The old key tries to extend the KEL as if it were still current.
  const stale = signEvent(
    {
      aid: state.aid,
      seq: 3,
      prev: events[2]!.id,
      type: 'rot',
      keys: [s[3]!.publicKey],
      nextDigest: digestOfKey(s[0]!.publicKey),
      threshold: 1,
      ts: 9,
    },
    s[0]!,
  );
  t.is(
    kelCode(() => validateKel([...events, stale])),
    'BAD_SIGNATURE',
  );
  t.throws(() => rotate(state, s[0]!, s[3]!, s[0]!.publicKey, 1), { message: /current key/ });
});
