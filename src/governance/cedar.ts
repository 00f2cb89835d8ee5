/**
 * Cedar policies for the `policy` action (docs/adr/0022-decision-pipeline.md):
 * parsed and validated when loaded, evaluated per call. The WebAssembly
 * engine is imported on first load only (ADR 0017: lazy start), so a gateway
 * without a policy file never loads it. Evaluation fails closed: an error in
 * the request or in any policy is a deny that carries the error.
 */
import { createHash } from "node:crypto";
import type * as CedarWasm from "@cedar-policy/cedar-wasm/nodejs";
import type { Principal } from "../auth/principal.js";
import { ErrorCodes, GatewayError } from "../errors.js";

type Cedar = typeof CedarWasm;
let engine: Promise<Cedar> | undefined;
const loadEngine = (): Promise<Cedar> => (engine ??= import("@cedar-policy/cedar-wasm/nodejs"));

export interface CedarRequest {
  principal?: Principal | undefined;
  action: "call_tool";
  server: string;
  tool: string;
  args?: Record<string, unknown> | undefined;
  face: string;
  sessionHash?: string | undefined;
  now: number;
}

export interface CedarAnswer {
  decision: "allow" | "deny";
  /** The policies that decided (their @id, else policy<N> in file order). */
  policyIds: string[];
  /** Set when evaluation failed (the decision is then deny). */
  error?: string;
}

export class CedarPolicy {
  private constructor(
    private readonly cedar: Cedar,
    /** The engine's cache keys of the parsed policy set and schema (preparsePolicySet / preparseSchema): parsed once per load, not per call. */
    private readonly policySetId: string,
    private readonly schemaName: string | undefined,
  ) {}

  /** Parses (and with a schema, validates) the policy text; errors name the file and line. */
  static async load(policy: { file: string; text: string }, schema?: { file: string; text: string }): Promise<CedarPolicy> {
    const cedar = await loadEngine();
    const parsed = cedar.checkParsePolicySet({ staticPolicies: policy.text });
    if (parsed.type === "failure") throw invalid(policy.file, policy.text, parsed.errors);
    if (schema) {
      const s = cedar.checkParseSchema(schema.text);
      if (s.type === "failure") throw invalid(schema.file, schema.text, s.errors);
      const v = cedar.validate({ schema: schema.text, policies: { staticPolicies: policy.text }, validationSettings: { mode: "strict" } });
      if (v.type === "failure") throw invalid(policy.file, policy.text, v.errors);
      if (v.validationErrors.length) {
        throw invalid(
          policy.file,
          policy.text,
          v.validationErrors.map((e) => ({ ...e.error, message: `policy ${e.policyId}: ${e.error.message}` })),
        );
      }
    }
    const parts = cedar.policySetTextToParts(policy.text);
    if (parts.type === "failure") throw invalid(policy.file, policy.text, parts.errors);
    const policies: Record<string, string> = {};
    parts.policies.forEach((text, i) => {
      const id = /@id\(\s*"((?:[^"\\]|\\.)*)"\s*\)/.exec(text)?.[1] ?? `policy${i}`;
      policies[Object.hasOwn(policies, id) ? `${id}#${i}` : id] = text;
    });
    // Keyed by content: a reload of the same text reuses the entry; each distinct version stays cached in the engine (one per policy change).
    const policySetId = `emceepee-${sha256(JSON.stringify(policies))}`;
    const pre = cedar.preparsePolicySet(policySetId, { staticPolicies: policies });
    if (pre.type === "failure") throw invalid(policy.file, policy.text, pre.errors);
    let schemaName: string | undefined;
    if (schema) {
      schemaName = `emceepee-schema-${sha256(schema.text)}`;
      const s = cedar.preparseSchema(schemaName, schema.text);
      if (s.type === "failure") throw invalid(schema.file, schema.text, s.errors);
    }
    return new CedarPolicy(cedar, policySetId, schemaName);
  }

  evaluate(r: CedarRequest): CedarAnswer {
    const principal = principalEntity(r.principal);
    const resource = { type: "Tool", id: `${r.server}/${r.tool}` };
    try {
      const answer = this.cedar.statefulIsAuthorized({
        principal: principal.uid,
        action: { type: "Action", id: r.action },
        resource,
        context: {
          arguments: cedarValue(r.args ?? {}) as Record<string, CedarWasm.CedarValueJson>,
          face: r.face,
          session: r.sessionHash ?? "",
          time: r.now,
        },
        preparsedPolicySetId: this.policySetId,
        entities: [principal, { uid: resource, attrs: { server: r.server, name: r.tool }, parents: [] }],
        ...(this.schemaName !== undefined ? { preparsedSchemaName: this.schemaName, validateRequest: true } : {}),
      });
      if (answer.type === "failure") return { decision: "deny", policyIds: [], error: answer.errors.map((e) => e.message).join("; ") };
      const { decision, diagnostics } = answer.response;
      if (diagnostics.errors.length) {
        return {
          decision: "deny",
          policyIds: diagnostics.errors.map((e) => e.policyId),
          error: diagnostics.errors.map((e) => `policy ${e.policyId}: ${e.error.message}`).join("; "),
        };
      }
      return { decision, policyIds: diagnostics.reason };
    } catch (err) {
      return { decision: "deny", policyIds: [], error: err instanceof Error ? err.message : String(err) };
    }
  }
}

/**
 * The caller as a Cedar entity: `User::"<subject>"` with attributes issuer,
 * subject and claims (values Cedar can hold: strings, booleans, integers and
 * sets and records of those). No principal (authentication off): `User::""`
 * with issuer "".
 */
function principalEntity(p: Principal | undefined) {
  const uid = { type: "User", id: p?.subject ?? "" };
  return {
    uid,
    attrs: { issuer: p?.issuer ?? "", subject: p?.subject ?? "", claims: cedarValue(p?.claims ?? {}) ?? {} },
    parents: [],
  };
}

/** JSON as a Cedar value: fractional numbers become strings, null and unsupported values are left out. */
function cedarValue(v: unknown): CedarWasm.CedarValueJson | undefined {
  if (typeof v === "string" || typeof v === "boolean") return v;
  if (typeof v === "number") return Number.isSafeInteger(v) ? v : String(v);
  if (Array.isArray(v)) return v.map(cedarValue).filter((x) => x !== undefined);
  if (v !== null && typeof v === "object") {
    const out: Record<string, CedarWasm.CedarValueJson> = {};
    for (const [k, x] of Object.entries(v)) {
      const c = cedarValue(x);
      // A record with `__entity` / `__extn` would be read as an entity reference or an extension value.
      if (c !== undefined && k !== "__entity" && k !== "__extn") out[k] = c;
    }
    return out;
  }
  return undefined;
}

interface CedarError {
  message: string;
  sourceLocations?: Array<{ start: number; end: number; label?: string | null }>;
}

function invalid(file: string, text: string, errors: CedarError[]): GatewayError {
  const lines = errors.map((e) => {
    const at = e.sourceLocations?.[0];
    if (!at) return e.message;
    const before = text.slice(0, at.start);
    const line = before.split("\n").length;
    const col = at.start - before.lastIndexOf("\n");
    return `line ${line}, column ${col}: ${e.message}${at.label ? ` (${at.label})` : ""}`;
  });
  return new GatewayError(ErrorCodes.CONFIG_INVALID, `Cedar file ${file} is not valid: ${lines.join("; ")}. Fix it and start again (or reload).`, {
    details: { file },
  });
}

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex").slice(0, 32);
