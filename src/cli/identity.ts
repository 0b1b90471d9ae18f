// `anet init`, `anet id`, `anet key rotate`, `anet kel export|verify`.
import { writeFile, readFile, chmod } from 'node:fs/promises';
import { createIdentity, loadIdentity, rotateIdentity, hasIdentity, type Identity } from '../identity/store.js';
import { encodeKel, validateKel, KelError, type KelState } from '../identity/kel.js';
import { verifyCard } from '../protocol/card/verify.js';
import { configPath } from '../config/load.js';
import { EXAMPLE_CONFIG } from '../config/example.js';
import { ensureDir, isNotFound } from '../util/fsutil.js';
import { CliError, printJson, usageError, type Io } from './output.js';
import { askDaemon, run } from '../node/open.js';
import { Store } from '../../store/db.js';

export async function cmdInit(io: Io, dataDir: string, json: boolean): Promise<void> {
  if (await hasIdentity(dataDir)) throw new CliError(`${dataDir} already holds an identity; use another --data directory`);
  await ensureDir(dataDir, 0o700);
  await chmod(dataDir, 0o700);
  const identity = await createIdentity(dataDir, Date.now());
  let wroteConfig = false;
  try {
    await writeFile(configPath(dataDir), EXAMPLE_CONFIG, { flag: 'wx', mode: 0o600 });
    wroteConfig = true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  if (json) return printJson(io, { aid: identity.aid, dataDir, config: wroteConfig ? 'created' : 'kept' });
  io.out(`created identity ${identity.aid}`);
  io.out(`data directory ${dataDir}`);
  io.out(
    wroteConfig ? `wrote an example ${configPath(dataDir)}; edit it, then run \`anet doctor\`` : `kept the existing ${configPath(dataDir)}`,
  );
}

export async function cmdId(io: Io, dataDir: string, json: boolean): Promise<void> {
  const identity = await loadIdentity(dataDir);
  if (json) return printJson(io, { aid: identity.aid, ksn: identity.kel.ksn, events: identity.kel.events.length });
  io.out(identity.aid);
}

export async function cmdKeyRotate(io: Io, dataDir: string, json: boolean): Promise<void> {
  if ((await askDaemon(dataDir, 'ping', {})) !== undefined) {
    throw new CliError('anet daemon is running with this data dir: stop it, rotate, then start it again (it publishes the new key)');
  }
  // Holding the store's lock serialises rotations (and keeps a daemon from starting meanwhile).
  const lock = await Store.open(dataDir);
  let identity: Identity;
  try {
    identity = await rotateIdentity(dataDir, Date.now());
  } finally {
    await lock.close();
  }
  // Readers follow the KEL: publish it (and a card signed with the new key) right away when we can.
  let published: string;
  try {
    const r = await run(dataDir, 'publish', {});
    published = r.outcome === 'published' ? `card seq ${r.own.seq} signed with the new key and published` : 'new KEL published';
  } catch (err) {
    published = `not published yet (${(err as Error).message.split('\n')[0]}); the daemon publishes it at its next start`;
  }
  if (json) return printJson(io, { aid: identity.aid, ksn: identity.kel.ksn, published });
  io.out(`rotated: ${identity.aid} now signs with key #${identity.kel.ksn}; ${published}`);
}

export async function cmdKelExport(io: Io, dataDir: string, file: string | undefined, hex: boolean): Promise<void> {
  const bytes = encodeKel((await loadIdentity(dataDir)).kel.events);
  const data = hex ? `${Buffer.from(bytes).toString('hex')}\n` : bytes;
  if (file) {
    await writeFile(file, data);
    io.err(`wrote ${bytes.length} bytes of KEL to ${file}`);
  } else if (hex) {
    io.out(Buffer.from(bytes).toString('hex'));
  } else {
    process.stdout.write(bytes);
  }
}

/** Reads a KEL file as raw CoreDet CBOR, or as hex text. */
export async function readKelFile(file: string): Promise<Uint8Array> {
  let raw: Buffer;
  try {
    raw = await readFile(file);
  } catch (err) {
    throw new CliError(isNotFound(err) ? `no such file: ${file}` : `cannot read ${file}: ${(err as Error).message}`);
  }
  const text = raw.toString('latin1').trim();
  return /^([0-9a-f]{2})+$/i.test(text) ? new Uint8Array(Buffer.from(text, 'hex')) : new Uint8Array(raw);
}

export async function cmdKelVerify(io: Io, file: string | undefined, json: boolean): Promise<void> {
  if (!file) throw usageError('kel verify needs a file');
  const bytes = await readKelFile(file);
  try {
    const kel = validateKel(bytes);
    if (json) return printJson(io, { ok: true, aid: kel.aid, ksn: kel.ksn, events: kel.events.length });
    io.out(`ok ${kel.aid} ksn ${kel.ksn} (${kel.events.length} events)`);
  } catch (err) {
    if (!(err instanceof KelError)) throw err;
    if (json) printJson(io, { ok: false, code: err.code, seq: err.seq ?? null, message: err.message });
    else io.out(`${err.code}: ${err.message}`);
    throw new CliError('', 1);
  }
}

/**
 * `anet card verify <card.json> --kel <kel file> [--now MS]` (SPEC §12): the WIRE §3 checks of a card
 * against a KEL, offline. Prints `ok` or the WIRE §3.4 code; exit 0 or 1.
 */
export async function cmdCardVerify(
  io: Io,
  cardFile: string | undefined,
  kelFile: string | undefined,
  nowFlag: string | undefined,
  json: boolean,
): Promise<void> {
  if (!cardFile || !kelFile)
    throw usageError('card verify needs the card and a KEL: anet card verify <card.json> --kel <kel file> [--now MS]');
  if (nowFlag !== undefined && !/^[0-9]{1,16}$/.test(nowFlag)) throw usageError('--now takes unix milliseconds');
  const wire = await readFile(cardFile, 'utf8').catch((err: NodeJS.ErrnoException) => {
    throw new CliError(`cannot read ${cardFile}: ${err.code ?? err.message}`, 1);
  });
  let kel: KelState | 'invalid';
  try {
    kel = validateKel(await readKelFile(kelFile));
  } catch (err) {
    if (!(err instanceof KelError)) throw err;
    kel = 'invalid';
  }
  const r = verifyCard(wire, { kel, now: nowFlag === undefined ? Date.now() : Number(nowFlag) });
  if (json)
    printJson(
      io,
      r.ok
        ? { ok: true, aid: r.identity.aid, seq: r.seq.toString(), ksn: r.ksn, digest: r.digest }
        : { ok: false, code: r.code, detail: r.detail },
    );
  else io.out(r.ok ? 'ok' : `${r.code}: ${r.detail}`);
  if (!r.ok) throw new CliError('', 1);
}
