// The ledger's routes (SPEC §10, §11, PROTOCOL §8.9): who may ask what of src/hub/ledger.ts.
import type { IncomingMessage } from 'node:http';
import { validateKel } from '../identity/kel.js';
import type { HubContext } from './context.js';
import { HubError, json } from './http.js';
import { header } from './auth.js';
import { known } from './directory.js';
import type { RequestNonce } from './storage/types.js';

/**
 * The ledger (SPEC §10, §11): POST /ledger/mint (the hub's own identity), /ledger/hold and /ledger/settle
 * (the payee), GET /ledger/accounts/<aid> (that AID or the hub). All signed; the ledger decides the rest.
 */
export async function handleLedger(ctx: HubContext, req: IncomingMessage, path: string, method: string, raw: Buffer) {
  const kind = ledgerKind(path, method, raw);
  try {
    const answer = await ledgerRoute(ctx, req, path, method, raw);
    ctx.metrics.ledgerOp(kind, 'ok');
    return answer;
  } catch (err) {
    ctx.metrics.ledgerOp(kind, (err as { code?: unknown }).code === undefined ? 'INTERNAL' : String((err as { code: unknown }).code));
    throw err;
  }
}

/** The operation a ledger request asks for, as the metrics name it: a settle by its action. */
function ledgerKind(path: string, method: string, raw: Buffer): string {
  const op = path.split('/').filter(Boolean)[1] ?? '';
  if (method === 'GET') return op === 'accounts' ? 'account' : 'other';
  if (op !== 'settle') return op;
  try {
    const action = JSON.parse(raw.toString('utf8')).action;
    return action === 'capture' || action === 'release' ? action : 'settle';
  } catch {
    return 'settle';
  }
}

async function ledgerRoute(ctx: HubContext, req: IncomingMessage, path: string, method: string, raw: Buffer) {
  const { storage, ledger, hubKel } = ctx;
  const parts = path.split('/').filter(Boolean);
  const route =
    method === 'GET' && parts.length === 3 && parts[1] === 'accounts'
      ? 'account'
      : method === 'POST' && parts.length === 2
        ? parts[1]
        : undefined;
  if (route !== 'account' && route !== 'mint' && route !== 'hold' && route !== 'settle')
    throw new HubError(404, 'NOT_FOUND', `no route ${method} ${path}`);
  // The hub is no agent of its own directory: its requests are checked against the KEL it loaded.
  const signer = header(req, 'x-anet-aid');
  const kel = signer === hubKel.aid ? hubKel : validateKel((await known(storage, signer)).kel);
  if (route === 'hold' || route === 'settle')
    return claimed(ctx, ctx.auth.verify(req, path, raw, kel), (n) => payeeOp(ctx, route, signer, raw, n));
  await ctx.auth.check(req, path, raw, kel);
  if (route === 'account') {
    const aid = parts[2]!;
    if (signer !== aid && signer !== hubKel.aid)
      throw new HubError(403, 'FORBIDDEN', 'an account is shown to its own AID and to the hub only');
    return ledger.account(aid);
  }
  const body = json(raw);
  if (signer !== hubKel.aid) throw new HubError(403, 'NOT_HUB', "only the hub's operator mints (`anet hub mint`)");
  return ledger.mint(body.aid as string, body.amount as string, body.nonce as string);
}

/**
 * A payee's op with its request nonce `n` claimed in the op's transaction, or here when the op did not
 * get that far (refused before, or failed): a replayed request is REPLAYED whatever the op would answer.
 */
async function claimed<T>(ctx: HubContext, n: RequestNonce, op: (n: RequestNonce) => Promise<T>): Promise<T> {
  let answer: T;
  try {
    answer = await op(n);
  } catch (err) {
    await ctx.auth.claim(n);
    throw err;
  }
  await ctx.auth.claim(n);
  return answer;
}

/** POST /ledger/hold and /ledger/settle, asked for by the payee. */
async function payeeOp(ctx: HubContext, route: 'hold' | 'settle', signer: string, raw: Buffer, n: RequestNonce) {
  const body = json(raw);
  if (route === 'hold') {
    if (typeof body.authorization !== 'string')
      throw new HubError(400, 'BAD_AUTHORIZATION', 'authorization must be the signed authorization, base64');
    return ctx.ledger.hold(signer, new Uint8Array(Buffer.from(body.authorization, 'base64')), n);
  }
  return ctx.ledger.settle(signer, body.hold as string, body.action as 'capture' | 'release', body.nonce as string, n);
}
