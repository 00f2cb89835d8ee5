/**
 * RFC 7662 token introspection for opaque access tokens: the gateway asks
 * the authorization server (with its own client credentials) whether a token
 * is active, and for whom. An active answer must name this resource in `aud`
 * (as a JWT must) unless `requireAudience` is off. Answers are cached by the
 * token's SHA-256 (the token itself is held only while it is being asked
 * about): active ones for `cacheMs`, never past `exp`; inactive ones for
 * `negativeCacheMs`; at most `cacheMaxEntries` of each kind, the oldest
 * dropped first (apart, so a flood of made-up tokens cannot push out the
 * answers for real ones).
 * Concurrent checks of one token share one request to the server.
 */
import { createHash } from "node:crypto";
import type { Clock } from "../clock.js";
import type { TokenRejection } from "./jwt.js";
import { scopesOf } from "./jwt.js";
import { makePrincipal, subjectOf, type Principal } from "./principal.js";

export interface IntrospectionOptions {
  endpoint: string;
  clientId: string;
  clientSecret: string;
  /** How long an active answer is reused (never past the token's `exp`). */
  cacheMs: number;
  /** How long an inactive answer is reused. */
  negativeCacheMs: number;
  cacheMaxEntries: number;
  /** Whether an active answer must carry `aud` (false: one without it is accepted; one with it is still checked). */
  requireAudience: boolean;
  /** Issuers accepted; an answer without `iss` is taken as the first one's. */
  issuers: readonly string[];
  clock: Clock;
  fetch?: typeof fetch | undefined;
  /** @default 10000 */
  timeoutMs?: number | undefined;
}

type Answer = { active: true; claims: Record<string, unknown> } | { active: false };

export class Introspector {
  /** Active answers, and inactive ones, by the token's hash. */
  private readonly cache = new Map<string, { answer: Answer; until: number }>();
  private readonly negative = new Map<string, { answer: Answer; until: number }>();
  /** Requests to the server in flight, by the token's hash: concurrent checks of one token wait for the same one. */
  private readonly inflight = new Map<string, Promise<Answer | TokenRejection>>();

  constructor(private readonly o: IntrospectionOptions) {}

  /** The token's principal, or why not; `audiences` as for JWTs. */
  async check(token: string, audiences: readonly string[], clockSkewMs: number): Promise<Principal | TokenRejection> {
    const answer = await this.answer(token);
    if (!("active" in answer)) return answer;
    if (!answer.active) return invalid("the authorization server says it is not active");
    const c = answer.claims;
    const now = this.o.clock.now();
    if (typeof c.exp === "number" && c.exp * 1000 + clockSkewMs <= now) return invalid("it has expired");
    const aud = typeof c.aud === "string" ? [c.aud] : Array.isArray(c.aud) ? c.aud : undefined;
    if (aud === undefined && this.o.requireAudience)
      return invalid(
        `the authorization server names no audience (aud) for it, so it may be meant for another resource; if this server never names one, set gateway.auth.oauth.introspection.requireAudience: false`,
      );
    if (aud !== undefined && !aud.some((a) => typeof a === "string" && audiences.includes(a)))
      return invalid(`its audience is not this resource (${audiences.join(" or ")})`);
    const issuer = typeof c.iss === "string" ? c.iss : this.o.issuers[0]!;
    if (!this.o.issuers.includes(issuer)) return invalid(`its issuer ${issuer} is not one of gateway.auth.oauth.issuers`);
    const subject = subjectOf(c);
    if ("refused" in subject) return invalid(subject.refused);
    return makePrincipal({
      issuer,
      subject: subject.subject,
      scopes: scopesOf(c),
      claims: c,
      clientId: typeof c.client_id === "string" ? c.client_id : undefined,
      expiresAt: typeof c.exp === "number" ? c.exp * 1000 : undefined,
    });
  }

  private answer(token: string): Promise<Answer | TokenRejection> {
    const key = createHash("sha256").update(token).digest("base64url");
    const now = this.o.clock.now();
    const hit = this.cache.get(key) ?? this.negative.get(key);
    if (hit && hit.until > now) return Promise.resolve(hit.answer);
    this.cache.delete(key);
    this.negative.delete(key);
    let pending = this.inflight.get(key);
    if (!pending) {
      pending = this.ask(key, token);
      this.inflight.set(key, pending);
    }
    return pending;
  }

  /** One request to the server; its answer is cached (a failure is not) and the in-flight entry dropped before anyone awaiting it resumes. */
  private async ask(key: string, token: string): Promise<Answer | TokenRejection> {
    try {
      const answer = await this.request(token);
      if ("active" in answer) this.remember(key, answer);
      return answer;
    } finally {
      this.inflight.delete(key);
    }
  }

  private remember(key: string, answer: Answer): void {
    const now = this.o.clock.now();
    const exp = answer.active && typeof answer.claims.exp === "number" ? answer.claims.exp * 1000 : Infinity;
    const until = answer.active ? Math.min(now + this.o.cacheMs, exp) : now + this.o.negativeCacheMs;
    if (until <= now) return;
    const cache = answer.active ? this.cache : this.negative;
    cache.set(key, { answer, until });
    while (cache.size > this.o.cacheMaxEntries) cache.delete(cache.keys().next().value!);
  }

  private async request(token: string): Promise<Answer | TokenRejection> {
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
      return body !== null && typeof body === "object" && body.active === true ? { active: true, claims: body } : { active: false };
    } catch (err) {
      return { kind: "unavailable", reason: `token introspection at ${this.o.endpoint} failed (${err instanceof Error ? err.message : String(err)})` };
    }
  }
}

function invalid(reason: string): TokenRejection {
  return { kind: "invalid", reason: `the access token was refused: ${reason}` };
}
