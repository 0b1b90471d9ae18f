// SPEC §13: every reason code with its one explanation sentence, the same in the CLI, MCP and A2A replies.
export const REASONS = {
  not_accepting: 'The agent does not accept this request from you.',
  capability_not_public: 'The agent offers no public capability with this id.',
  bad_args: 'The arguments must be a JSON object without top-level keys that start with "$".',
  args_too_large: 'The argument document is larger than the capability accepts.',
  files_not_accepted: 'The files sent are not accepted by this capability (count, size or type).',
  quota_caller_per_min: 'You have used your per-minute quota for this capability; retry after the time given.',
  quota_caller_per_day: 'You have used your daily quota for this capability; retry after the time given.',
  quota_global_per_min: 'The capability has reached its per-minute limit for all callers; retry after the time given.',
  max_inflight: 'The capability is running as many calls as it allows at once; retry shortly.',
  caller_inflight: 'You already have as many calls of this capability running as it allows.',
  service_unavailable: 'The service behind the capability is not available; the call did not run and can be retried.',
  service_busy: 'The service is busy; the call did not run and can be retried later.',
  service_rejected: 'The service refused the call; its message says why.',
  service_error: 'The service failed while handling the call.',
  outcome_unknown: 'The call may or may not have run; do not resend it blindly.',
  interrupted: 'The provider restarted while the call was running; its outcome is unknown.',
  file_unavailable:
    'A file of the call could not be read from the hub while the service was called (gone, damaged, or the hub unreachable): the service never got a whole request.',
  not_delivered:
    'The task could not be sent to the other node (no encryption keys on the hub, the hub unreachable, or the message too large); nothing ran.',
  payment_required: 'The capability is priced: the task waits for payment.',
  payment_rejected: 'The payment was rejected.',
  canceled: 'The caller canceled the task while it ran: its service request was stopped, and any payment held for it was given back.',
  quote_above_price: 'The quote is above the price the agent signed on its card, so it was not paid automatically.',
  quote_expired: 'The payment quote has expired.',
  settlement_failed: 'The hub could not settle the payment.',
  not_applicable:
    'The agent declares no payments and has not given you a contact credential, so it was not contacted: this is its public card.',
  not_configured: 'The agent has nothing to add to its public card for you: no prices and no extra skills.',
  card_unavailable:
    "The agent's extended card could not be obtained (busy, no answer within 10 s, or unreachable): this is its public card.",
  card_signature_invalid: "The agent's extended card failed its signature or key check and was not used: this is its public card.",
  card_stale:
    "The agent's newest extended card could not be obtained, so this is the last one it signed for you, for an older version of its public card; quotes are not paid automatically under it.",
  UNSIGNED: 'The card carries no signature.',
  MALFORMED_JSON: 'The card is not valid JSON (or repeats a member).',
  INVALID_CARD: 'The card does not match the Agent Card schema or its ANet fields are not canonical.',
  BAD_SIGNATURE_HEADER: "The card's signature header is not EdDSA with a did:anet key id.",
  BINDING_MISMATCH: "The card's tenant, key id and anet-card AID are not the same AID.",
  INVALID_SIGNATURE: "The card's signature does not verify: it was altered or signed by another key.",
  KEY_NOT_CURRENT: "The card is signed with a key that is not the AID's current key.",
  KEL_UNAVAILABLE: "The AID's key event log could not be obtained, so the card cannot be checked.",
  UNKNOWN_AID: 'The key event log is invalid or belongs to another AID.',
  CARD_NOT_YET_VALID: 'The card is not valid yet (its notBefore is in the future).',
  CARD_TOO_LARGE: 'The card exceeds a size limit (name, description, skills, tags, bytes or signatures).',
  SEQ_ROLLBACK: 'The card is older than one already seen for this AID.',
  SEQ_FORK: 'Another card with the same sequence number was already seen for this AID.',
} as const;

export type Reason = keyof typeof REASONS;

export const explain = (reason: string): string => (REASONS as Record<string, string>)[reason] ?? reason;
