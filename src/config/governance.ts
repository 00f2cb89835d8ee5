/**
 * The `gateway.governance` settings (issue 24, docs/adr/0022-decision-pipeline.md):
 * visibility rules, the ordered call rules, the Cedar policy files, the profile
 * the audit record, curation and virtual servers. Profile "off" (the default): no
 * decisions (curation and virtual servers still apply).
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
  /** allow, deny, approve (a person must approve: governance.approvals), policy (ask Cedar). */
  action: z.enum(["allow", "deny", "approve", "policy"]),
});

/**
 * A visibility rule is about tools (`tool`), resources and resource templates (`resource`: a glob
 * on the URI, or a template's uriTemplate) or prompts (`prompt`: a name glob); one with none of
 * them (`tool` "*") is about everything of the matched servers.
 */
export const visibilityRuleSchema = z
  .strictObject({
    ...target,
    resource: z.string().min(1).optional(),
    prompt: z.string().min(1).optional(),
    visible: z.boolean(),
  })
  .refine((r) => [r.tool !== "*", r.resource !== undefined, r.prompt !== undefined].filter(Boolean).length <= 1, {
    message: "a visibility rule is about one of tool, resource or prompt (or, with none, everything of the server); split it into one rule per kind",
  });

/** A tool name as MCP allows it (letters, digits, `_`, `-`, `.`; 1 to 128). */
const toolName = z.string().regex(/^[A-Za-z0-9_.-]{1,128}$/, "a tool name is 1 to 128 letters, digits, '_', '-' or '.'");

/**
 * Curation of one upstream tool for the callers it matches (docs/adr/0024):
 * the first entry matching the caller, server and tool applies.
 */
export const curationSchema = z
  .strictObject({
    id: z.string().min(1).optional(),
    /** The upstream server's name, exactly. */
    server: z.string().min(1),
    /** The upstream tool's name, exactly. */
    tool: z.string().min(1),
    /** Whom it applies to; absent: every caller. */
    principal: principalMatch.optional(),
    /** The tool's name for these callers; its upstream name is then unknown to them. */
    name: toolName.optional(),
    title: z.string().min(1).max(200).optional(),
    description: z.string().max(10_000).optional(),
    /** Merged over the upstream's annotations (a key given here wins). */
    annotations: z.record(z.string(), z.unknown()).optional(),
    arguments: z
      .strictObject({
        /** Always sent with these values, and removed from the input schema the caller sees; a caller that sends one is refused. */
        fixed: z.record(z.string(), z.unknown()).optional(),
        /** Sent with these values when the caller leaves them out (shown as the property's `default`, no longer required). */
        defaults: z.record(z.string(), z.unknown()).optional(),
      })
      .optional(),
  })
  .superRefine((c, ctx) => {
    const fixed = Object.keys(c.arguments?.fixed ?? {});
    for (const k of Object.keys(c.arguments?.defaults ?? {}))
      if (fixed.includes(k))
        ctx.addIssue({ code: "custom", path: ["arguments", "defaults", k], message: `'${k}' is fixed already; give it in fixed or in defaults, not both` });
  });

/**
 * A named profile (issue 24): visibility, rules, a mode and curation for the principals
 * governance.profileFor gives it. Each of visibility, rules and mode given replaces the
 * gateway's for them (a virtual server's own parts still win on its face); a part left out
 * is the gateway's. Its curation comes before the gateway's list (docs/adr/0024 §profiles).
 */
export const namedProfileSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, "a profile's name is 1 to 64 letters, digits, '_', '-' or '.'"),
  /** enforce or dry-run for these principals; absent: governance.profile. */
  mode: z.enum(["enforce", "dry-run"]).optional(),
  visibility: z.array(visibilityRuleSchema).optional(),
  visibleByDefault: z.boolean().optional(),
  rules: z.array(governanceRuleSchema).optional(),
  defaultAction: z.enum(["allow", "deny", "approve", "policy"]).optional(),
  /** Curation for these principals, looked at before governance.curation (first matching entry per tool wins). */
  curation: z.array(curationSchema).max(10_000).optional(),
});

/** A tool offered by a virtual server: an upstream's tool, under `as` if given. */
const virtualTool = z.strictObject({ server: z.string().min(1), tool: z.string().min(1), as: toolName.optional() });

/** A virtual server (docs/adr/0024): its own transparent face at /v/<name>/mcp offering exactly these tools. */
export const virtualServerSchema = z
  .strictObject({
    name: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, "a virtual server's name is 1 to 64 letters, digits, '_', '-' or '.' (it is a URL path segment)"),
    title: z.string().min(1).max(200).optional(),
    /** The face's `instructions` at initialize. */
    instructions: z.string().max(10_000).optional(),
    tools: z.array(virtualTool).min(1),
    /** Replaces gateway.governance.visibility on this face when given. */
    visibility: z.array(visibilityRuleSchema).optional(),
    visibleByDefault: z.boolean().optional(),
    /** Replaces gateway.governance.rules (and defaultAction) on this face when given. */
    rules: z.array(governanceRuleSchema).optional(),
    defaultAction: z.enum(["allow", "deny", "approve", "policy"]).optional(),
  })
  .superRefine((v, ctx) => {
    const seen = new Map<string, number>();
    v.tools.forEach((t, i) => {
      const exposed = t.as ?? t.tool;
      const first = seen.get(exposed);
      if (first !== undefined)
        ctx.addIssue({ code: "custom", path: ["tools", i], message: `tools[${first}] offers '${exposed}' already; give one of them another name with "as"` });
      else seen.set(exposed, i);
    });
  });

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
    /** Named profiles (visibility, rules, mode) principals get by governance.profileFor. */
    profiles: z.array(namedProfileSchema).max(1_000).default([]),
    /** Which principals get which profile: the first entry whose principal matches (claims, roles, groups, subject, issuer); none: the gateway's own settings. */
    profileFor: z
      .array(z.strictObject({ principal: principalMatch, profile: z.string().min(1) }))
      .max(10_000)
      .default([]),
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
        /** How often the retention sweep deletes decision records past maxAgeMs or maxRecords (also trimmed on each append). */
        sweepMs: z.number().int().positive().default(3_600_000),
      })
      .prefault({}),
    /** Human approval of calls a rule sends to `approve` (docs/adr/0025-approvals.md). */
    approvals: z
      .strictObject({
        /** A pending approval nobody decides within this expires; its task fails "approval expired". The task's TTL is this plus the call's (tasks.maxTtlMs bounds both). */
        ttlMs: z.number().int().positive().default(900_000),
        /** How long a plain tools/call (a client that did not ask for a task) is held waiting for the decision, with progress keep-alives; then it fails naming the approval. */
        holdMs: z.number().int().min(0).default(60_000),
        /** Progress keep-alives to a held call (when it sent a progress token), this often. */
        keepAliveMs: z.number().int().positive().default(15_000),
        /** Whether the person who made the call may approve it themselves. */
        allowSelfApproval: z.boolean().default(false),
        /** How often each replica looks at the store for decisions, expiries and cancels it has to act on. */
        pollMs: z.number().int().positive().default(1_000),
        /** Decided approvals are deleted this long after they were asked. */
        retentionMs: z
          .number()
          .int()
          .positive()
          .default(7 * 24 * 3_600_000),
        /** Told of each new approval: a JSON body, or a Slack incoming-webhook body (`text`), with a link to the console page. */
        webhooks: z
          .array(z.strictObject({ url: z.url({ protocol: /^https?$/ }), format: z.enum(["json", "slack"]).default("json") }))
          .max(20)
          .default([]),
        /** The console's public base URL for the links in webhooks (e.g. https://gw.example.com); absent: the gateway's own address. */
        consoleUrl: z.url({ protocol: /^https?$/ }).optional(),
      })
      .prefault({}),
    /** Pinned tool definitions (docs/adr/0029): a tool whose definition changed after it was first seen is quarantined until an admin accepts it. */
    pins: z
      .strictObject({
        /** off; hide: a changed tool is absent and unknown; approve: it is listed but each call needs a person's approval. */
        mode: z.enum(["off", "hide", "approve"]).default("off"),
      })
      .prefault({}),
    /** Per caller: renamed tools, other titles, descriptions and annotations, fixed or default arguments (first matching entry per tool). */
    curation: z.array(curationSchema).max(10_000).default([]),
    /** Named transparent faces at /v/<name>/mcp, each offering a chosen set of tools from several upstreams. */
    virtualServers: z.array(virtualServerSchema).max(1_000).default([]),
  })
  .refine(
    (g) => g.cedar !== undefined || [g, ...g.profiles].every((p) => p.defaultAction !== "policy" && (p.rules ?? []).every((r) => r.action !== "policy")),
    {
      message: 'the action "policy" asks Cedar: set governance.cedar.policyFile, or use allow / deny / approve',
      path: ["cedar"],
    },
  )
  .superRefine((g, ctx) => {
    const profileNames = new Set<string>();
    g.profiles.forEach((p, i) => {
      if (profileNames.has(p.name)) ctx.addIssue({ code: "custom", path: ["profiles", i, "name"], message: `two profiles are named '${p.name}'; rename one` });
      profileNames.add(p.name);
    });
    g.profileFor.forEach((m, i) => {
      if (!profileNames.has(m.profile))
        ctx.addIssue({
          code: "custom",
          path: ["profileFor", i, "profile"],
          message: `no profile '${m.profile}' in governance.profiles (have: ${[...profileNames].join(", ") || "none"})`,
        });
    });
    if (g.profiles.length > 0 && g.profile === "off")
      ctx.addIssue({
        code: "custom",
        path: ["profiles"],
        message: 'profiles apply only when governance.profile is "enforce" or "dry-run"; set one, or remove them',
      });
    const names = new Set<string>();
    g.virtualServers.forEach((v, i) => {
      if (names.has(v.name))
        ctx.addIssue({ code: "custom", path: ["virtualServers", i, "name"], message: `two virtual servers are named '${v.name}'; rename one` });
      names.add(v.name);
      const own = v.rules !== undefined || v.visibility !== undefined || v.defaultAction !== undefined || v.visibleByDefault !== undefined;
      if (own && g.profile === "off")
        ctx.addIssue({
          code: "custom",
          path: ["virtualServers", i],
          message:
            'rules, defaultAction and visibility of a virtual server apply only when governance.profile is "enforce" or "dry-run"; set one, or remove them',
        });
      if (g.cedar === undefined && (v.defaultAction === "policy" || (v.rules ?? []).some((r) => r.action === "policy")))
        ctx.addIssue({
          code: "custom",
          path: ["virtualServers", i, "rules"],
          message: 'the action "policy" asks Cedar: set governance.cedar.policyFile, or use allow / deny / approve',
        });
    });
    const lists: Array<[readonly (string | number)[], readonly CurationEntry[]]> = [[["curation"], g.curation]];
    g.profiles.forEach((p, i) => lists.push([["profiles", i, "curation"], p.curation ?? []]));
    for (const [at, list] of lists) {
      const curated = new Set<string>();
      list.forEach((c, i) => {
        if (c.principal !== undefined) return;
        const key = JSON.stringify([c.server, c.tool]);
        if (curated.has(key))
          ctx.addIssue({
            code: "custom",
            path: [...at, i],
            message: `an earlier entry for every caller curates '${c.tool}' on '${c.server}' already, so this one never applies; merge them`,
          });
        curated.add(key);
      });
    }
  })
  .prefault({});

export type GovernanceSettings = z.infer<typeof governanceSchema>;

/**
 * Curation entries and virtual-server tools naming a server the file does not
 * declare: not an error (a runtime server of that name would be used, or it is
 * disabled for now), but likely a typo, so the operator hears of it at start.
 */
export function governanceWarnings(g: Pick<GovernanceSettings, "curation" | "virtualServers" | "profiles">, servers: readonly string[]): string[] {
  const unknown = (server: string) => !servers.includes(server);
  const says = (server: string) =>
    `no server '${server}' in mcpServers (have: ${servers.join(", ") || "none"}); it applies only if a server of that name is added at runtime`;
  return [
    ...g.curation.flatMap((c, i) => (unknown(c.server) ? [`gateway.governance.curation[${i}].server: ${says(c.server)}`] : [])),
    ...g.profiles.flatMap((p, i) =>
      (p.curation ?? []).flatMap((c, j) => (unknown(c.server) ? [`gateway.governance.profiles[${i}].curation[${j}].server: ${says(c.server)}`] : [])),
    ),
    ...g.virtualServers.flatMap((v, i) =>
      v.tools.flatMap((t, j) => (unknown(t.server) ? [`gateway.governance.virtualServers[${i}].tools[${j}].server: ${says(t.server)}`] : [])),
    ),
  ];
}
export type GovernanceRule = z.infer<typeof governanceRuleSchema>;
export type VisibilityRule = z.infer<typeof visibilityRuleSchema>;
export type PrincipalMatch = z.infer<typeof principalMatch>;
export type CurationEntry = z.infer<typeof curationSchema>;
export type VirtualServerSettings = z.infer<typeof virtualServerSchema>;
export type NamedProfile = z.infer<typeof namedProfileSchema>;
