// WIRE §4 / RFC 9180 Appendix A.2.1: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, ChaCha20-Poly1305, Base
// mode — our seal reproduces the RFC's encryption of sequence number 0 byte for byte, and opens it.
import test from 'ava';
import { seal, open } from '../../src/protocol/hpke.js';

const h = (s: string) => new Uint8Array(Buffer.from(s, 'hex'));
const skEm = h('f4ec9b33b792c372c1d2c2063507b684ef925b8c75a42dbcbf57d63ccd381600');
const pkEm = h('1afa08d3dec047a643885163f1180476fa7ddb54c6a8029ea33f95796bf2ac4a');
const skRm = h('8057991eef8f1f1af18f4a9491d16a1ce333f695d4db8e38da75975c4478e0fb');
const pkRm = h('4310ee97d88cc1f088a5576c77ab0cf5c3ac797f3d95139c6c84b5429c59662a');
const info = h('4f6465206f6e2061204772656369616e2055726e');
const pt = h('4265617574792069732074727574682c20747275746820626561757479');
const aad = h('436f756e742d30');
const ct = '1c5250d8034ec2b784ba2cfd69dbdb8af406cfe3ff938e131f0def8c8b60b4db21993c62ce81883d2dd1b51a28';

test('WIRE §4, RFC 9180 A.2.1: seal with the RFC ephemeral key gives the RFC enc and ciphertext; open recovers the plaintext', (t) => {
  for (let i = 0; i < 2; i++) {
    // Twice: the second call uses the remembered key-schedule context.
    const sealed = seal(pkRm, info, aad, pt, { privateKey: skEm, publicKey: pkEm });
    t.is(Buffer.from(sealed.enc).toString('hex'), Buffer.from(pkEm).toString('hex'));
    t.is(Buffer.from(sealed.ct).toString('hex'), ct);
  }
  t.deepEqual(Buffer.from(open({ privateKey: skRm, publicKey: pkRm }, info, aad, pkEm, h(ct))), Buffer.from(pt));
});
