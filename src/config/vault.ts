/** gateway.vault: the keys that seal upstream credentials, and the bounds of started upstream OAuth flows (src/upstream/auth/). */
import { z } from "zod";

export const vaultSchema = z
  .strictObject({
    /**
     * AES-256 keys as base64 (32 bytes each, e.g. `openssl rand -base64 32`), separated by commas or new lines; the first seals,
     * the others only open what they sealed (rotation). Absent: EMCEEPEE_VAULT_KEY, else `keyFile`, else no vault (upstreams with
     * `auth` cannot be used).
     */
    keys: z.string().min(1).optional(),
    /** A file holding the keys in the same form (read at start). */
    keyFile: z.string().min(1).optional(),
    /** How long a started upstream authorization may take before its callback is refused. */
    flowTtlMs: z.number().int().min(10_000).max(3_600_000).default(600_000),
    /** Started upstream authorizations kept at once (those that expire first make room). */
    maxPendingFlows: z.number().int().min(1).max(1_000_000).default(10_000),
    /** An access token is refreshed this long before it expires. */
    refreshAheadMs: z.number().int().min(0).max(3_600_000).default(60_000),
  })
  .refine((v) => v.keys === undefined || v.keyFile === undefined, { message: "set keys or keyFile, not both" })
  .prefault({});
