import { createCipheriv, randomBytes, createHash } from 'node:crypto';
import sodium from 'sodium-native';
import { readFileSync } from 'node:fs';
const mode = process.argv[2], slice = +(process.argv[3] ?? 65536);
const key = randomBytes(32), n = Buffer.alloc(12), pt = randomBytes(1 << 20);
const faults = () => +readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ')[7];
const f0 = faults(); const c0 = process.cpuUsage(); const h = createHash('sha256');
if (mode === 'sodium') { const ct = Buffer.alloc(pt.length + 16); for (let i = 0; i < 64; i++) { sodium.crypto_aead_chacha20poly1305_ietf_encrypt(ct, pt, null, null, n, key); h.update(ct); } }
else for (let i = 0; i < 64; i++) { const c = createCipheriv('chacha20-poly1305', key, n, { authTagLength: 16 }); for (let a = 0; a < pt.length; a += slice) h.update(c.update(pt.subarray(a, a + slice))); c.final(); h.update(c.getAuthTag()); }
h.digest(); const c = process.cpuUsage(c0);
console.log(mode, slice, 'cpu', ((c.user + c.system) / 1000).toFixed(0), 'ms sys', (c.system / 1000).toFixed(0), 'faults', faults() - f0);
