/**
 * Matching a call against visibility and call rules: server and tool globs,
 * the principal (issuer, subject glob, claims) and argument conditions
 * (JSON pointer equals / matches). Pure functions; first match wins.
 */
import type { GovernanceRule, GovernanceSettings, NamedProfile, PrincipalMatch, VisibilityRule } from "../config/governance.js";
import type { Principal } from "../auth/principal.js";

const globs = new Map<string, RegExp>();

/** `*` any run of characters, `?` one; everything else literal; whole-string. */
export function globMatch(glob: string, value: string): boolean {
  let re = globs.get(glob);
  if (!re) {
    const body = [...glob].map((c) => (c === "*" ? ".*" : c === "?" ? "." : c.replace(/[\\^$.|+()[\]{}]/g, "\\$&"))).join("");
    re = new RegExp(`^${body}$`, "su");
    globs.set(glob, re);
  }
  return re.test(value);
}

export function principalMatches(m: PrincipalMatch | undefined, p: Principal | undefined): boolean {
  if (m === undefined) return true;
  if (p === undefined) return false;
  if (m.issuer !== undefined && m.issuer !== p.issuer) return false;
  if (m.subject !== undefined && !globMatch(m.subject, p.subject)) return false;
  for (const [name, want] of Object.entries(m.claims ?? {})) {
    const wanted = Array.isArray(want) ? want : [want];
    const have = p.claims[name];
    const values = Array.isArray(have) ? have : [have];
    if (!values.some((v) => typeof v === "string" && wanted.includes(v))) return false;
  }
  return true;
}

/** The value at an RFC 6901 JSON pointer, or undefined when the path is absent. */
export function atPointer(doc: unknown, pointer: string): unknown {
  if (pointer === "") return doc;
  let cur: unknown = doc;
  for (const raw of pointer.slice(1).split("/")) {
    const key = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (cur === null || typeof cur !== "object" || !Object.hasOwn(cur, key)) return undefined;
    cur = (cur as Record<string, unknown>)[key];
  }
  return cur;
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}

/** The value with object keys sorted at every depth (canonical JSON, for comparison and digests). */
export function canonical(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (v !== null && typeof v === "object") {
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, canonical((v as Record<string, unknown>)[k])]),
    );
  }
  return v;
}

export interface CallTarget {
  principal?: Principal | undefined;
  server: string;
  tool: string;
  args?: Record<string, unknown> | undefined;
}

function targets(r: { server: string; tool: string; principal?: PrincipalMatch | undefined }, c: CallTarget): boolean {
  return globMatch(r.server, c.server) && globMatch(r.tool, c.tool) && principalMatches(r.principal, c.principal);
}

function argumentsMatch(rule: GovernanceRule, args: Record<string, unknown> | undefined): boolean {
  return (rule.arguments ?? []).every((cond) => {
    const v = atPointer(args ?? {}, cond.pointer);
    if (cond.equals !== undefined) return v !== undefined && sameJson(v, cond.equals);
    return typeof v === "string" && new RegExp(cond.matches!, "u").test(v);
  });
}

/** The first call rule that matches, with its id (`rules[<index>]` when it has none). */
export function firstRule(rules: readonly GovernanceRule[], c: CallTarget): { rule: GovernanceRule; id: string } | undefined {
  const i = rules.findIndex((r) => targets(r, c) && argumentsMatch(r, c.args));
  return i < 0 ? undefined : { rule: rules[i]!, id: rules[i]!.id ?? `rules[${i}]` };
}

/** Whether the principal sees the tool: the first matching visibility rule about tools (or the whole server), else the default. */
export function isVisible(rules: readonly VisibilityRule[], byDefault: boolean, c: CallTarget): boolean {
  return rules.find((r) => r.resource === undefined && r.prompt === undefined && targets(r, c))?.visible ?? byDefault;
}

/** What a resource or prompt visibility rule looks at: a resource's URI (a template's uriTemplate) or a prompt's name. */
export interface ItemTarget {
  principal?: Principal | undefined;
  server: string;
  kind: "resource" | "prompt";
  name: string;
}

/** Whether the principal sees the resource, template or prompt: the first matching rule about that kind (or the whole server), else the default. */
export function isItemVisible(rules: readonly VisibilityRule[], byDefault: boolean, c: ItemTarget): boolean {
  const about = (r: VisibilityRule) => {
    const glob = c.kind === "resource" ? r.resource : r.prompt;
    if (glob !== undefined) return globMatch(glob, c.name);
    // A rule about the other kind, or about tools, says nothing here; one about none of them is about the whole server.
    return r.tool === "*" && r.resource === undefined && r.prompt === undefined;
  };
  return rules.find((r) => about(r) && globMatch(r.server, c.server) && principalMatches(r.principal, c.principal))?.visible ?? byDefault;
}

/** The named profile governance.profileFor gives the principal: the first entry that matches it; undefined: the gateway's own settings. */
export function profileFor(s: Pick<GovernanceSettings, "profiles" | "profileFor">, principal: Principal | undefined): NamedProfile | undefined {
  const name = s.profileFor.find((m) => principalMatches(m.principal, principal))?.profile;
  return name === undefined ? undefined : s.profiles.find((p) => p.name === name);
}

type ItemSettings = Pick<GovernanceSettings, "profiles" | "profileFor" | "visibility" | "visibleByDefault">;

/** Whether the principal sees the resource, template or prompt under these settings (the principal's profile's visibility, else the gateway's). */
export function itemVisibleUnder(s: ItemSettings, c: ItemTarget): boolean {
  const p = profileFor(s, c.principal);
  return isItemVisible(p?.visibility ?? s.visibility, p?.visibleByDefault ?? s.visibleByDefault, c);
}

/** What of the settings decides resource and prompt visibility, as a string: equal strings, equal views for everyone. */
export function itemVisibilityKey(s: ItemSettings): string {
  return JSON.stringify([s.visibility, s.visibleByDefault, s.profileFor, s.profiles.map((p) => [p.name, p.visibility, p.visibleByDefault])]);
}
