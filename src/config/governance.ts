/**
 * The `gateway.governance` settings (issue 24, docs/adr/0022-decision-pipeline.md):
 * visibility rules, the ordered call rules, the Cedar policy files, the profile
 * and the audit record. Profile "off" (the default): no governance at all (nothing changes).
 */
import { z } from "zod";

/** Who a rule is about; every given field must match. Absent: everyone (also a caller without a principal). */
const principalMatch = z.strictObject({
  /** The token's issuer, exactly (the static token's is "urn:emceepee:static-token"). */
  issuer: z.string().min(1).optional(),
  /** The subject, a glob (`*` any run of characters, `?` one). */
  subject: z.string().min(1).optional(),
  /** Claim name → the value it must have, or one of several; an array claim matches when it contains one. */
  claims: z.record(z.string(), z.union([z.string(), z.array(z.string()).min(1)])).optional(),
});

const compiles = (s: string) => {
  try {
    new RegExp(s, "u");
    return true;
  } catch {
    return false;
  }
};

/** A condition on the call's arguments: the value at a JSON pointer (RFC 6901) equals a value, or (a string) matches a regular expression. */
const argumentCondition = z
  .strictObject({
    pointer: z.string().regex(/^(\/.*)?$/, 'pointer must be a JSON pointer: "" or "/path/to/field"'),
    equals: z.unknown().optional(),
    matches: z.string().refine(compiles, "matches must be a valid regular expression").optional(),
  })
  .refine((c) => (c.equals === undefined) !== (c.matches === undefined), { message: "an argument condition needs exactly one of equals or matches" });

const target = {
  /** Rule id in decision records and errors; absent: `rules[<index>]` / `visibility[<index>]`. */
  id: z.string().min(1).optional(),
  /** Server name glob. */
  server: z.string().min(1).default("*"),
  /** Tool name glob. */
  tool: z.string().min(1).default("*"),
  principal: principalMatch.optional(),
};

export const governanceRuleSchema = z.strictObject({
  ...target,
  /** All must hold for the rule to match. */
  arguments: z.array(argumentCondition).optional(),
  /** allow, deny, approve (a person must approve: not built yet, refused in enforce), policy (ask Cedar). */
  action: z.enum(["allow", "deny", "approve", "policy"]),
});

export const visibilityRuleSchema = z.strictObject({ ...target, visible: z.boolean() });

export const governanceSchema = z
  .strictObject({
    /** off: no governance; enforce: apply decisions; dry-run: let every call through and record would_deny / would_require_approval. */
    profile: z.enum(["off", "enforce", "dry-run"]).default("off"),
    /** Which tools a principal sees: first match wins; a hidden tool is absent from lists and unknown when called. */
    visibility: z.array(visibilityRuleSchema).default([]),
    /** Visible unless a visibility rule says otherwise. */
    visibleByDefault: z.boolean().default(true),
    /** Call rules, first match wins. */
    rules: z.array(governanceRuleSchema).default([]),
    /** The action when no rule matches. */
    defaultAction: z.enum(["allow", "deny", "approve", "policy"]).default("allow"),
    /** Cedar policies (and optionally their schema, to validate them against) for the `policy` action. */
    cedar: z
      .strictObject({
        policyFile: z.string().min(1),
        schemaFile: z.string().min(1).optional(),
      })
      .optional(),
    audit: z
      .strictObject({
        /** Keep the call's arguments in the decision record (otherwise only their SHA-256 digest). */
        storeArguments: z.boolean().default(false),
        /** Decision records older than this are deleted. */
        maxAgeMs: z
          .number()
          .int()
          .positive()
          .default(30 * 24 * 3_600_000),
        /** At most this many decision records are kept (the oldest go first). */
        maxRecords: z.number().int().positive().default(100_000),
      })
      .prefault({}),
  })
  .refine((g) => g.cedar !== undefined || (g.defaultAction !== "policy" && g.rules.every((r) => r.action !== "policy")), {
    message: 'the action "policy" asks Cedar: set governance.cedar.policyFile, or use allow / deny / approve',
    path: ["cedar"],
  })
  .prefault({});

export type GovernanceSettings = z.infer<typeof governanceSchema>;
export type GovernanceRule = z.infer<typeof governanceRuleSchema>;
export type VisibilityRule = z.infer<typeof visibilityRuleSchema>;
export type PrincipalMatch = z.infer<typeof principalMatch>;
