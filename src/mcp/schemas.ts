// The output schemas of the tools of `anet mcp` (SPEC §12): the structured content each tool returns,
// field by field, so a client knows the shape before it calls. The MCP SDK checks each result against its
// tool's schema on both sides. Objects are open (`additionalProperties` allowed): a field the node adds
// later must not turn every answer into a validation error in clients built against this list (the tests
// check the lists equal what the tools return).
import { z } from 'zod';

const ms = (what: string) => z.number().describe(`${what}, in milliseconds since 1970 (UTC).`);
const text = (what: string) => z.string().nullable().describe(what);
const json = z.record(z.string(), z.unknown());

const REASON = 'The reason code of a refusal or failure (SPEC §13), or null.';
const EXPLANATION = 'One sentence saying what the reason means and what to do, or null.';

/** A priced call's quote and payment (SPEC §10). */
const payment = z
  .looseObject({
    status: z.enum(['payment-required', 'payment-submitted', 'payment-completed', 'payment-failed', 'payment-rejected']),
    skillId: z.string(),
    required: z.string().describe('The x402 PaymentRequired JSON exactly as the provider signed it.'),
    signature: z.string(),
    quote: json.nullable().describe('The verified quote (amount, payee, expiry), or null when it did not verify.'),
    quoteError: text('Why the quote did not verify, or null.'),
    receivedAt: ms('When the quote arrived'),
    expiresAt: ms('When the quote expires'),
    decided: z.boolean().describe('Whether the auto-pay rule has been applied yet.'),
    auto: z.boolean().nullable().describe('The rule paid it (true), left it to the operator (false), or has not decided (null).'),
    why: text('Why the rule left it to the operator, or null.'),
    price: json.nullable().describe("The signed price from the agent's card that the quote was checked against."),
    nonce: text('The payment authorization nonce, once paid.'),
    authorizedAt: z.number().nullable(),
    hubTx: text("The hub's hold transaction, once paid."),
    receipts: z.unknown(),
  })
  .nullable()
  .describe("A priced call's quote and payment; null for free calls and text tasks.");

/** A task this node sent: what call_capability, send_text, get_task, pay_task and reject_task return. */
export const taskRecord = {
  task: z.string().describe('The task id.'),
  to: z.string().describe("The other agent's AID."),
  capability: z.string().describe('The capability called, or "chat" for a text task.'),
  state: z.enum(['submitted', 'working', 'input-required', 'completed', 'failed', 'rejected', 'canceled']),
  sentAt: ms('When the task was sent'),
  updatedAt: ms('When the record last changed'),
  reason: text(REASON),
  explanation: text(EXPLANATION),
  retryAfterMs: z.number().nullable().describe('How long to wait before trying again, when the other side said so.'),
  detail: text('More about a failure, or null.'),
  message: text("The other side's status message, or null."),
  result: z.unknown().describe("The result: the capability's JSON, `{text}` for a text task; null until completed."),
  receipt: text("The CID of the provider's receipt when it verified, `invalid: …` when it did not, or null."),
  payment,
  context: text('The A2A contextId the task was sent in, or null.'),
};

const agentRow = z.looseObject({
  aid: z.string(),
  name: z.string(),
  charge: z.enum(['free', 'some skills paid', 'paid']),
  key: z.enum(['confirmed', 'stale', 'invalid']).describe("The agent's key history as checked against the hub."),
  verified: z.boolean().describe('Whether the card verified.'),
  code: text('Why the card did not verify, or null.'),
  skills: z.array(z.string()).describe('The skill ids on its public card.'),
});

export const agents = { agents: z.array(agentRow).describe('The agents found, best match first.') };

/** The data of `anet card --json` (SPEC §6.4). */
export const card = {
  aid: z.string(),
  verified: z.boolean(),
  key: z.enum(['confirmed', 'stale', 'invalid']),
  charge: z.enum(['free', 'some skills paid', 'paid']),
  card: json.nullable().describe('The Agent Card: the extended card when it was obtained, else the public card.'),
  extended: z.enum(['ok', 'not_applicable', 'not_configured']).nullable().describe('What became of the extended card.'),
  reason: text(REASON),
  explanation: z.string().describe('One or more sentences: where the prices come from, or why only the public card is shown.'),
  prices: z
    .array(z.looseObject({ skillId: z.string(), amount: z.string().describe('Credits, as a decimal string.') }))
    .nullable()
    .describe('The signed prices, when the extended card was obtained.'),
  fetchedAt: z.number().nullable(),
  stale: z.boolean().describe('The extended card shown is for an older public card: the newest could not be obtained.'),
  lastAttemptAt: z.number().nullable(),
  nextAttemptAt: z.number().nullable(),
};

export const tasks = { tasks: z.array(z.looseObject(taskRecord)).describe('Every task this node sent, oldest first.') };

export const balance = {
  aid: z.string(),
  balance: z.string().describe('Credits, as a decimal string.'),
  held: z.string().describe('Credits held for paid calls still running.'),
  history: z
    .array(
      z.looseObject({
        seq: z.number(),
        tx: z.string(),
        at: z.number(),
        kind: z.enum(['mint', 'hold', 'capture', 'release', 'expire', 'credit']),
        amount: z.string(),
        counterparty: z.string().nullable(),
        hold: z.string().nullable(),
        balance: z.string().describe('The balance after this entry.'),
      }),
    )
    .describe('The newest ledger entries, newest last.'),
};
