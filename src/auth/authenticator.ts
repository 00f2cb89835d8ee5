/**
 * Who is calling, from the Authorization header: the static token (principal
 * "operator"), or an OAuth access token — a JWT checked against its issuer's
 * keys, or an opaque one by introspection — carrying every required scope.
 * Both can be configured at once (a machine token beside user logins).
 * Failures are the spec's challenges: 401 with `resource_metadata`, 403
 * `insufficient_scope`, 503 while an issuer's keys cannot be had.
 */
import type { IncomingMessage } from "node:http";
import type { Clock } from "../clock.js";
import type { GatewaySettings } from "../config/schema.js";
import { bearerChallenge } from "./challenge.js";
import { Introspector } from "./introspection.js";
import { IssuerKeys, type IssuerKeysOptions } from "./issuer-keys.js";
import { looksLikeJwt, verifyJwt, type TokenRejection } from "./jwt.js";
import { OPERATOR, type Principal } from "./principal.js";
import { externalBase, metadataUrl, resourceUrl, type ResourceUrlOptions } from "./resource-url.js";
import { secretEquals } from "./secret.js";

export type OAuthSettings = GatewaySettings["auth"]["oauth"];

export interface AuthenticatorOptions {
  /** The static token (gateway.token). */
  token?: string | undefined;
  oauth: OAuthSettings;
  urls: ResourceUrlOptions;
  /** Whether `path` is a face (its own PRM and resource URL); other paths (/metrics) use the gateway's. */
  isFace(path: string): boolean;
  clock: Clock;
  fetch?: typeof fetch | undefined;
  /** Key-set caching (tests shorten the cooldown). */
  keys?: Partial<IssuerKeysOptions> | undefined;
}

/**
 * A verified caller with the bearer token it sent (for attachPrincipal, which keeps it beside the principal, never in
 * it: token passthrough and token exchange use it; docs/adr/0027 §14), or the challenge to answer.
 */
export type AuthOutcome = { principal: Principal; token: string } | { status: 401 | 403 | 503; message: string; headers: Record<string, string> };

export class Authenticator {
  private readonly keys: IssuerKeys;
  private readonly introspector: Introspector | undefined;

  constructor(private readonly o: AuthenticatorOptions) {
    this.keys = new IssuerKeys({ clock: o.clock, fetch: o.fetch, ...o.keys });
    const { endpoint, clientId, clientSecret, ...cache } = o.oauth.introspection;
    this.introspector =
      endpoint === undefined || clientId === undefined || clientSecret === undefined
        ? undefined
        : new Introspector({ endpoint, clientId, clientSecret, ...cache, issuers: o.oauth.issuers, clock: o.clock, fetch: o.fetch });
  }

  async authenticate(req: IncomingMessage, path: string): Promise<AuthOutcome> {
    const facePath = this.o.isFace(path) ? path : "";
    const prm = metadataUrl(req, this.o.urls, facePath);
    const scopes = this.o.oauth.scopes;
    const token = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? "")?.[1];
    if (token === undefined) {
      return {
        status: 401,
        message: `this endpoint needs an access token: send Authorization: Bearer <token>; an OAuth client discovers where to get one from ${prm}`,
        headers: { "WWW-Authenticate": bearerChallenge({ resourceMetadata: prm, scopes }) },
      };
    }
    if (this.o.token !== undefined && secretEquals(token, this.o.token)) return { principal: OPERATOR, token };
    const base = externalBase(req, this.o.urls);
    const audiences = [...new Set([resourceUrl(req, this.o.urls, facePath), base, `${base}/`, ...this.o.oauth.audiences])];
    const result = await this.check(token, audiences);
    if ("kind" in result) {
      if (result.kind === "unavailable") return { status: 503, message: `${result.reason}; try again shortly`, headers: { "Retry-After": "5" } };
      return {
        status: 401,
        message: `${result.reason}; get a new one (discovery: ${prm})`,
        headers: { "WWW-Authenticate": bearerChallenge({ resourceMetadata: prm, scopes, error: "invalid_token", description: result.reason }) },
      };
    }
    const missing = scopes.filter((s) => !result.scopes.includes(s));
    if (missing.length > 0) {
      return {
        status: 403,
        message: `the access token lacks the scope(s) ${missing.join(", ")}; ask for a token with scope "${scopes.join(" ")}"`,
        headers: {
          "WWW-Authenticate": bearerChallenge({
            resourceMetadata: prm,
            scopes,
            error: "insufficient_scope",
            description: `missing scope(s): ${missing.join(" ")}`,
          }),
        },
      };
    }
    return { principal: result, token };
  }

  private check(token: string, audiences: string[]): Promise<Principal | TokenRejection> {
    const { issuers, clockSkewMs, jwtType } = this.o.oauth;
    if (looksLikeJwt(token)) return verifyJwt(token, { issuers, audiences, clockSkewMs, type: jwtType }, this.keys, this.o.clock);
    if (this.introspector) return this.introspector.check(token, audiences, clockSkewMs);
    return Promise.resolve({
      kind: "invalid",
      reason: "the access token was refused: it is not a JWT, and no introspection endpoint is configured (gateway.auth.oauth.introspection) for opaque tokens",
    });
  }
}
