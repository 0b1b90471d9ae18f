// WIRE.md §4: HPKE Base mode, DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, ChaCha20-Poly1305 — our libsodium
// assembly interoperates with @hpke/core (an independent RFC 9180 implementation) in both directions.
import test from 'ava';
import { CipherSuite, HkdfSha256 } from '@hpke/core';
import { DhkemX25519HkdfSha256 } from '@hpke/dhkem-x25519';
import { Chacha20Poly1305 } from '@hpke/chacha20poly1305';
import { createHmac, randomBytes } from 'node:crypto';
import { seal, open, generateX25519, x25519PublicOf } from '../../src/protocol/hpke.js';
import { hmacSha256 } from '../../src/util/sodium.js';

const suite = new CipherSuite({ kem: new DhkemX25519HkdfSha256(), kdf: new HkdfSha256(), aead: new Chacha20Poly1305() });
const te = new TextEncoder();
const ab = (u: Uint8Array) => u.slice().buffer as ArrayBuffer;

test('WIRE §4: what we seal, @hpke/core opens', async (t) => {
  const recipient = await suite.kem.generateKeyPair();
  const pk = new Uint8Array(await suite.kem.serializePublicKey(recipient.publicKey));
  const info = te.encode('anet-relay/v1 info');
  for (const size of [0, 1, 100, 5000]) {
    const msg = new Uint8Array(size).map((_, i) => i % 251);
    const { enc, ct } = seal(pk, info, new Uint8Array(), msg);
    t.is(enc.length, 32);
    t.is(ct.length, size + 16);
    const ctx = await suite.createRecipientContext({ recipientKey: recipient.privateKey, enc: ab(enc), info: ab(info) });
    t.deepEqual(new Uint8Array(await ctx.open(ab(ct))), msg);
  }
});

test('WIRE §4, RFC 9180: every seal has its own ephemeral key, whether made ahead (between event-loop turns) or on the spot', async (t) => {
  const me = generateX25519();
  const info = te.encode('info bytes');
  const encs = new Set<string>();
  for (let round = 0; round < 20; round++) {
    // Several seals in one turn empty the pool made ahead; the next turn refills it.
    for (let i = 0; i < 5; i++) {
      const { enc, ct } = seal(me.publicKey, info, new Uint8Array(), te.encode(`m${round}.${i}`));
      encs.add(Buffer.from(enc).toString('hex'));
      t.is(new TextDecoder().decode(open(me, info, new Uint8Array(), enc, ct)), `m${round}.${i}`);
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
  t.is(encs.size, 100, 'no ephemeral key was used twice');
});

test('WIRE §4: what @hpke/core seals, we open; any change to enc, ct or info is refused', async (t) => {
  const me = generateX25519();
  t.deepEqual(x25519PublicOf(me.privateKey), me.publicKey);
  const info = te.encode('info bytes');
  const ctx = await suite.createSenderContext({
    recipientPublicKey: await suite.kem.deserializePublicKey(ab(me.publicKey)),
    info: ab(info),
  });
  const ct = new Uint8Array(await ctx.seal(ab(te.encode('hello relay'))));
  const enc = new Uint8Array(ctx.enc);
  t.is(new TextDecoder().decode(open(me, info, new Uint8Array(), enc, ct)), 'hello relay');
  const flip = (u: Uint8Array, i: number) => Uint8Array.from(u, (b, j) => (j === i ? b ^ 1 : b));
  t.throws(() => open(me, info, new Uint8Array(), enc, flip(ct, 0)));
  t.throws(() => open(me, info, new Uint8Array(), enc, flip(ct, ct.length - 1)));
  t.throws(() => open(me, info, new Uint8Array(), flip(enc, 3), ct));
  t.throws(() => open(me, te.encode('other info'), new Uint8Array(), enc, ct));
  t.throws(() => open(generateX25519(), info, new Uint8Array(), enc, ct), undefined, 'another recipient');
});

test('WIRE §4 / RFC 9180 §7.1.4: a small-order ephemeral key (all-zero DH) is refused', (t) => {
  const me = generateX25519();
  t.throws(() => open(me, new Uint8Array(), new Uint8Array(), new Uint8Array(32), new Uint8Array(16)), { message: /all-zero/ });
});

test('WIRE §4: the key schedule HMAC-SHA256 (two libsodium SHA-256 calls) is RFC 2104 HMAC, for messages up to and past its reused buffer', (t) => {
  // Against OpenSSL's HMAC, with messages split in parts as the key schedule passes them.
  for (const length of [0, 1, 28, 55, 64, 200, 255, 256, 257, 4096, 70_000]) {
    const key = randomBytes(32);
    const message = randomBytes(length);
    const parts = [message.subarray(0, length >> 1), new Uint8Array(), message.subarray(length >> 1)];
    const want = createHmac('sha256', key).update(message).digest();
    t.deepEqual(Buffer.from(hmacSha256(key, parts)), want, `${length} bytes`);
  }
  // After the buffer grew for the 70,000 bytes, a short message still hashes only its own bytes.
  const key = randomBytes(32);
  const short = randomBytes(40);
  t.deepEqual(Buffer.from(hmacSha256(key, [short])), createHmac('sha256', key).update(short).digest());
  t.throws(() => hmacSha256(new Uint8Array(31), []), { message: /32-byte key, not 31 bytes/ });
});
