// The hub's ledger API (PROTOCOL §8.9): what `/ledger/mint`, `/ledger/hold`, `/ledger/settle` and
// `GET /ledger/accounts/<aid>` answer. The hub (src/hub/ledger.ts) makes these answers and the node's hub
// client reads them; both import them from here, so the client never reaches into the hub.

export interface MintAnswer {
  tx: string;
  aid: string;
  amount: string;
  /** The account's balance after the mint. */
  balance: string;
}

export interface HoldAnswer {
  tx: string;
  /** The authorization's nonce: the hold's id for settle. */
  hold: string;
  from: string;
  to: string;
  amount: string;
  state: 'held';
  at: number;
}

export interface SettleAnswer {
  tx: string;
  hold: string;
  action: 'capture' | 'release';
  /** "0" for a release of a hold the hub never saw (state `void`). */
  amount: string;
  state: 'captured' | 'released' | 'void';
  at: number;
}

export type HistoryKind = 'mint' | 'hold' | 'capture' | 'release' | 'expire' | 'credit';

export interface HistoryEntry {
  /** 1, 2, ... per account. */
  seq: number;
  tx: string;
  at: number;
  kind: HistoryKind;
  amount: string;
  /** The other party: the payee of a hold, capture, release or expire; the payer of a credit; null for a mint. */
  counterparty: string | null;
  hold: string | null;
  /** The account's balance after this entry. */
  balance: string;
}

export interface Account {
  aid: string;
  balance: string;
  /** The sum of this AID's open holds as payer. */
  held: string;
  /** The newest HISTORY_LIMIT entries, newest last. */
  history: HistoryEntry[];
}

/** The code and message of a hub's error answer (`{"error": {"code", "message"}}`); else the HTTP status and the text's start. */
export function hubError(status: number, text: string): { code: string; message: string } {
  let code = `HTTP_${status}`;
  let message = text.slice(0, 200);
  try {
    const e = JSON.parse(text).error;
    code = e.code;
    message = e.message;
  } catch {
    /* not our error shape */
  }
  return { code, message };
}
