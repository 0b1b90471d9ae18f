// The config.json schema of SPEC §2, with its defaults. Structural rules live here; rules that relate
// several fields (offered capabilities, in-flight limits, URLs) are in check.ts.
import { z } from 'zod';
import { MAX_TIMEOUT_MS } from '../runtime/clock.js';

export const MAX_CREDITS = (1n << 63n) - 1n;
export const CAPABILITY_ID = /^[a-z0-9][a-z0-9._-]{0,63}$/;
const MEDIA_RANGE = /^(\*\/\*|[a-z0-9][a-z0-9!#$&^_.+-]*\/(\*|[a-z0-9][a-z0-9!#$&^_.+-]*))$/;

const count = (min: number, fallback: number) =>
  z
    .number({ error: `must be an integer ≥ ${min}` })
    .int({ error: `must be an integer ≥ ${min}` })
    .min(min, { error: `must be ≥ ${min}` })
    .default(fallback);

const credits = z
  .union([z.number(), z.bigint()], { error: 'must be an integer number of credits' })
  // A number beyond 2^53 that was not written as a plain integer (e.g. 9007199254740993.0) lost precision.
  .refine((v) => typeof v === 'bigint' || Number.isSafeInteger(v), {
    error: 'must be an integer number of credits, written without a decimal point or exponent',
  })
  .transform((v) => BigInt(v))
  .refine((v) => v >= 0n && v <= MAX_CREDITS, { error: `must be between 0 and ${MAX_CREDITS}` });

const capabilityId = z.string({ error: 'must be a capability id string' }).regex(CAPABILITY_ID, {
  error: 'must match ^[a-z0-9][a-z0-9._-]{0,63}$ (lower case, digits, . _ -)',
});

const files = z.strictObject({
  max_count: z.number().int().min(1, { error: 'must be between 1 and 8' }).max(8, { error: 'must be between 1 and 8' }).default(1),
  max_bytes: z
    .number()
    .int()
    .min(1, { error: 'must be between 1 and 67108864 (64 MiB)' })
    .max(67108864, { error: 'must be between 1 and 67108864 (64 MiB)' })
    .default(8388608),
  media_types: z
    .array(z.string().regex(MEDIA_RANGE, { error: 'must be a media type such as image/png or image/*' }), {
      error: 'media_types is required: a non-empty list such as ["image/png"]',
    })
    .min(1, { error: 'media_types must not be empty' }),
});

const publicCapability = z.strictObject({
  id: capabilityId,
  per_caller_per_min: count(1, 60),
  per_caller_per_day: count(1, 2000),
  global_per_min: count(1, 1200),
  max_inflight: count(1, 16),
  per_caller_inflight: count(1, 1),
  max_args_bytes: count(2, 4096),
  allow_only: z.boolean().default(false),
  files: files.optional(),
  discard: z.boolean().default(false),
});

const text = z.string();
const serviceCapability = z.strictObject({
  id: capabilityId,
  url: z.string({ error: 'url is required: unix:///path/to/socket' }),
  price: credits.optional(),
  name: text.optional(),
  description: text.optional(),
  tags: z.array(text).optional(),
  examples: z.array(text).optional(),
  input_modes: z.array(text).optional(),
  output_modes: z.array(text).optional(),
  timeout_ms: z
    .number()
    .int()
    .min(1)
    .max(MAX_TIMEOUT_MS, { error: `must be at most ${MAX_TIMEOUT_MS} (about 24.8 days)` })
    .optional(),
  token_file: text.optional(),
});

export const configSchema = z.strictObject({
  hub: z.string().default('http://127.0.0.1:8710'),
  inbound: z
    .strictObject({
      policy: z.enum(['closed', 'open'], { error: 'must be "closed" or "open"' }).default('closed'),
      allow_file: text.default('peers.allow'),
      trust_file: text.default('peers.trust'),
      deny_file: text.default('peers.deny'),
      public_capabilities: z.array(publicCapability).default([]),
    })
    .prefault({}),
  modules: z
    .strictObject({
      service: z
        .strictObject({
          allow_tcp: z.boolean().default(false),
          timeout_ms: count(1, 120000).refine((v) => v <= MAX_TIMEOUT_MS, { error: `must be at most ${MAX_TIMEOUT_MS} (about 24.8 days)` }),
          token_file: text.optional(),
          capabilities: z.array(serviceCapability).default([]),
        })
        .prefault({}),
      agent: z.strictObject({ url: text }).optional(),
      preview: z.strictObject({ enabled: z.boolean().default(false) }).prefault({}),
    })
    .prefault({}),
  payments: z
    .strictObject({
      auto_max: credits.default(100n),
      daily_max: credits.default(1000n),
    })
    .prefault({}),
  local: z.strictObject({ a2a: text.default('127.0.0.1:41811') }).prefault({}),
});

export type Config = z.output<typeof configSchema>;
export type PublicCapability = Config['inbound']['public_capabilities'][number];
export type ServiceCapability = Config['modules']['service']['capabilities'][number];
