// SPEC §9.4, WIRE §5: receipts — CoreDet, signed by the provider's current key, bound to the task, the
// capability, the caller and the result; anything else is refused.
import test from 'ava';
import { signReceipt, checkReceipt, resultHash } from '../../src/protocol/receipt.js';
import { testIdentity } from '../helpers/identity.js';
import { encodeCanonical } from '../../src/identity/cbor.js';

const provider = testIdentity('rcpt-provider', 1);
const other = testIdentity('rcpt-other');
const identity = { aid: provider.kel.aid, kel: provider.kel, signer: provider.keys[1]! };
const result = { words: 4, text: 'é' };
const base = { task: '00000000000000c1', capability: 'text.wordcount', caller: other.kel.aid, result_hash: new Uint8Array(), at: 1 };

test('WIRE §5: a receipt verifies for its own task, capability, caller and result only', (t) => {
  const signed = signReceipt(identity, { ...base, result_hash: resultHash(result) });
  const expect = { kel: provider.kel, task: base.task, caller: base.caller, capability: base.capability, result };
  const ok = checkReceipt(signed.bytes, expect);
  t.true(ok.ok);
  t.is(ok.ok && ok.cid, signed.cid);
  t.regex(signed.cid, /^bafyrei/);
  t.false(checkReceipt(signed.bytes, { ...expect, capability: 'text.other' }).ok, 'another capability');
  t.false(checkReceipt(signed.bytes, { ...expect, task: '00000000000000c2' }).ok, 'another task');
  t.false(checkReceipt(signed.bytes, { ...expect, caller: provider.kel.aid }).ok, 'another caller');
  t.false(checkReceipt(signed.bytes, { ...expect, result: { words: 5, text: 'é' } }).ok, 'another result');
  t.false(checkReceipt(signed.bytes, { ...expect, kel: other.kel }).ok, 'another provider');
  const stale = signReceipt(
    { ...identity, kel: { ...provider.kel, ksn: 0 }, signer: provider.keys[0]! },
    { ...base, result_hash: resultHash(result) },
  );
  t.false(checkReceipt(stale.bytes, expect).ok, 'a rotated-away key');
  t.false(
    checkReceipt(
      encodeCanonical(
        new Map<number, never>([
          [1, new Uint8Array([0xff]) as never],
          [2, `did:anet:${provider.kel.aid}#1` as never],
          [3, provider.keys[1]!.sign(new Uint8Array([0xff])) as never],
        ]),
      ),
      expect,
    ).ok,
    'a signed non-CBOR document',
  );
});

test("WIRE §5, SPEC §10: a paid call's receipt names the captured amount and hub transaction, and verifies only with those", (t) => {
  const signed = signReceipt(identity, { ...base, result_hash: resultHash(result), amount: '9223372036854775807', hub_tx: 'tx_00ff' });
  const expect = {
    kel: provider.kel,
    task: base.task,
    caller: base.caller,
    capability: base.capability,
    result,
    amount: '9223372036854775807',
    hubTx: 'tx_00ff',
  };
  t.true(checkReceipt(signed.bytes, expect).ok);
  t.false(checkReceipt(signed.bytes, { ...expect, amount: '9223372036854775806' }).ok, 'another amount');
  t.false(checkReceipt(signed.bytes, { ...expect, hubTx: 'tx_00fe' }).ok, 'another transaction');
  const { amount: _a, hubTx: _h, ...free } = expect;
  t.false(checkReceipt(signed.bytes, free).ok, 'a paid receipt is not a free one');
  t.false(
    checkReceipt(signReceipt(identity, { ...base, result_hash: resultHash(result) }).bytes, expect).ok,
    'a free receipt is not a paid one',
  );
});
