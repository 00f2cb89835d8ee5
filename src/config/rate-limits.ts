/**
 * The `gateway.rateLimits` settings (issue 24, docs/adr/0023-rate-limits.md):
 * token buckets a tool call must each take a token from. Empty (the default):
 * no rate limits.
 */
import { z } from "zod";

/** What a bucket counts by: one bucket for everyone, or one per principal, server, tool (server + tool), or pairs. */
export const RATE_LIMIT_SCOPES = ["global", "principal", "server", "tool", "principal+server", "principal+tool"] as const;

export const rateLimitSchema = z
  .strictObject({
    /** Names the limit in errors, logs and the bucket keys; absent: `rateLimits[<index>]`. */
    name: z.string().min(1).max(100).optional(),
    scope: z.enum(RATE_LIMIT_SCOPES),
    /** Which calls the limit counts: a server name glob and a tool name glob (`*` any run, `?` one). */
    server: z.string().min(1).default("*"),
    tool: z.string().min(1).default("*"),
    /** Only these callers' calls count (issuer exactly, subject a glob); absent: every caller, also one without a principal. */
    principal: z.strictObject({ issuer: z.string().min(1).optional(), subject: z.string().min(1).optional() }).optional(),
    /** Tokens a full bucket holds: the burst allowed after a quiet spell. */
    capacity: z.number().int().positive().max(1_000_000_000),
    /** Tokens regained per second (give this or refillPerMinute). */
    refillPerSecond: z.number().positive().max(1_000_000).optional(),
    /** Tokens regained per minute. */
    refillPerMinute: z.number().positive().max(60_000_000).optional(),
  })
  .refine((l) => (l.refillPerSecond === undefined) !== (l.refillPerMinute === undefined), {
    message: "a rate limit needs exactly one of refillPerSecond or refillPerMinute (e.g. capacity: 10, refillPerMinute: 60)",
  });

export type RateLimitSettings = z.infer<typeof rateLimitSchema>;
export type RateLimitScope = (typeof RATE_LIMIT_SCOPES)[number];
