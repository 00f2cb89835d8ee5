/**
 * RFC 7662 token introspection for opaque access tokens: the gateway asks
 * the authorization server (with its own client credentials) whether a token
 * is active, and for whom. Answers are cached by the token's hash (never the
 * token) for `cacheMs`, never past the token's `exp`, at most
 * `cacheMaxEntries` (the oldest dropped first).
 */
import { createHash } from "node:crypto";
import type { Clock } from "../clock.js";
import type { TokenRejection } from "./jwt.js";
import { scopesOf } from "./jwt.js";
import { makePrincipal, type Principal } from "./principal.js";

export interface IntrospectionOptions {
  endpoint: string;
  clientId: string;
  clientSecret: string;
  cacheMs: number;
  cacheMaxEntries: number;
  /** Issuers accepted; an answer without `iss` is taken as the first one's. */
  issuers: readonly string[];
  clock: Clock;
  fetch?: typeof fetch | undefined;
  /** @default 10000 */
  timeoutMs?: number | undefined;
}

type Answer = { active: true; claims: Record<string, unknown> } | { active: false };

export class Introspector {
  private readonly cache = new Map<string, { answer: Answer; until: number }>();

  constructor(private readonly o: IntrospectionOptions) {}

  /** The token's principal, or why not; `audiences` as for JWTs (an answer without `aud` is not audience-bound and is accepted). */
  async check(token: string, audiences: readonly string[], clockSkewMs: number): Promise<Principal | TokenRejection> {
    const answer = await this.answer(token);
    if (!("active" in answer)) return answer;
    if (!answer.active) return { kind: "invalid", reason: "the access token was refused: the authorization server says it is not active" };
    const c = answer.claims;
    const now = this.o.clock.now();
    if (typeof c.exp === "number" && c.exp * 1000 + clockSkewMs <= now) return { kind: "invalid", reason: "the access token was refused: it has expired" };
    const aud = typeof c.aud === "string" ? [c.aud] : Array.isArray(c.aud) ? c.aud : undefined;
    if (aud !== undefined && !aud.some((a) => audiences.includes(a as string)))
      return { kind: "invalid", reason: `the access token was refused: its audience is not this resource (${audiences.join(" or ")})` };
    const issuer = typeof c.iss === "string" ? c.iss : this.o.issuers[0]!;
    if (!this.o.issuers.includes(issuer))
      return { kind: "invalid", reason: `the access token was refused: its issuer ${issuer} is not one of gateway.auth.oauth.issuers` };
    const subject = typeof c.sub === "string" ? c.sub : typeof c.client_id === "string" ? c.client_id : undefined;
    if (subject === undefined) return { kind: "invalid", reason: "the access token was refused: introspection names no sub or client_id" };
    return makePrincipal({
      issuer,
      subject,
      scopes: scopesOf(c),
      claims: c,
      clientId: typeof c.client_id === "string" ? c.client_id : undefined,
      expiresAt: typeof c.exp === "number" ? c.exp * 1000 : undefined,
    });
  }

  private async answer(token: string): Promise<Answer | TokenRejection> {
    const key = createHash("sha256").update(token).digest("base64url");
    const now = this.o.clock.now();
    const hit = this.cache.get(key);
    if (hit && hit.until > now) return hit.answer;
    this.cache.delete(key);
    let answer: Answer;
    try {
      const res = await (this.o.fetch ?? fetch)(this.o.endpoint, {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          accept: "application/json",
          authorization: `Basic ${Buffer.from(`${encodeURIComponent(this.o.clientId)}:${encodeURIComponent(this.o.clientSecret)}`).toString("base64")}`,
        },
        body: new URLSearchParams({ token, token_type_hint: "access_token" }).toString(),
        signal: AbortSignal.timeout(this.o.timeoutMs ?? 10_000),
      });
      if (!res.ok)
        return { kind: "unavailable", reason: `token introspection at ${this.o.endpoint} answered HTTP ${res.status}; check gateway.auth.oauth.introspection` };
      const body = (await res.json()) as Record<string, unknown>;
      answer = body.active === true ? { active: true, claims: body } : { active: false };
    } catch (err) {
      return { kind: "unavailable", reason: `token introspection at ${this.o.endpoint} failed (${err instanceof Error ? err.message : String(err)})` };
    }
    const exp = answer.active && typeof answer.claims.exp === "number" ? answer.claims.exp * 1000 : Infinity;
    const until = Math.min(now + this.o.cacheMs, exp);
    if (until > now) {
      this.cache.set(key, { answer, until });
      while (this.cache.size > this.o.cacheMaxEntries) this.cache.delete(this.cache.keys().next().value!);
    }
    return answer;
  }
}
