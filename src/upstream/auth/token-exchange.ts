/**
 * Token exchange (RFC 8693) per upstream (issue 23, docs/adr/0027-upstream-identity.md §16): for a remote server with
 * `auth: { type: "token_exchange" }` the caller's verified inbound access token is exchanged at the identity provider
 * for a token meant for that upstream, cached in memory per (principal, server) until shortly before it expires, and
 * sent as Bearer; a 401 from the upstream drops it and exchanges once more. The request and its response go through
 * oauth4webapi, loaded at the first exchange (docs/adr/0045). No token (inbound or exchanged) is ever put in a message or a
 * log line.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import type * as OAuth from "oauth4webapi";
import { principalHash, STATIC_ISSUER } from "../../auth/principal.js";
import type { Clock } from "../../clock.js";
import { isStdioConfig, type ServerConfig, type TokenExchangeConfig } from "../../config/server-entry.js";
import { ErrorCodes, errorMessage, GatewayError } from "../../errors.js";
import type { Logger } from "../../logging.js";
import type { FetchLike } from "../../mcp/sse-request-tap.js";
import type { TransportFactory } from "../transport-types.js";

export const TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange";
export const ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token";

/** Exchanged tokens kept at most (the least recently used go first). @default 10000 */
export const DEFAULT_MAX_CACHED = 10_000;

export interface TokenExchangesOptions {
  clock: Clock;
  logger: Logger;
  /** An exchanged token is used until this long before it expires (gateway.vault.refreshAheadMs); one that lives less is used once. */
  refreshAheadMs: number;
  /** @default DEFAULT_MAX_CACHED */
  maxCached?: number | undefined;
}

/** Whose token is exchanged, for which server. */
export interface ExchangeTarget {
  server: string;
  config: TokenExchangeConfig;
  /** The principal the session acts for (undefined: authentication off). */
  owner: { issuer: string; subject: string } | undefined;
}

interface Cached {
  token: string;
  /** Epoch ms after which it is exchanged again (its expiry less refreshAheadMs). */
  renewAt: number;
}

/** The exchanged-token cache and the exchanges of one gateway (made once, in the upstream factory). */
/** oauth4webapi, at the first exchange: a gateway with no token-exchanging server never loads it. */
let oauthModule: Promise<typeof OAuth> | undefined;
const loadOAuth = (): Promise<typeof OAuth> => (oauthModule ??= import("oauth4webapi"));

export class TokenExchanges {
  private readonly cache = new Map<string, Cached>();
  /** One exchange at a time per cache key: concurrent calls of one person wait for the same answer. */
  private readonly inflight = new Map<string, Promise<string>>();
  /** Authorization server metadata per issuer (discovery), dropped when it fails. */
  private readonly servers = new Map<string, Promise<OAuth.AuthorizationServer>>();
  private readonly maxCached: number;

  constructor(private readonly o: TokenExchangesOptions) {
    this.maxCached = o.maxCached ?? DEFAULT_MAX_CACHED;
  }

  /** Exchanged tokens cached now (tests and metrics). */
  get size(): number {
    return this.cache.size;
  }

  /** `base` with each request carrying `t.owner`'s exchanged token; `subjectToken()` gives their newest inbound token. */
  fetchFor(t: ExchangeTarget, subjectToken: () => string | undefined, base: FetchLike): FetchLike {
    return async (url, init) => {
      const send = (token: string) => {
        const headers = new Headers(init?.headers);
        headers.set("authorization", `Bearer ${token}`);
        return base(url, { ...init, headers });
      };
      const token = await this.token(t, subjectToken);
      const res = await send(token);
      if (res.status !== 401) return res;
      // Refused (revoked, or the upstream's keys changed): exchanged once more, and the request sent again once.
      await res.body?.cancel();
      this.drop(token);
      return send(await this.token(t, subjectToken));
    };
  }

  /** The owner's exchanged token for the server: from the cache, else exchanged now. */
  async token(t: ExchangeTarget, subjectToken: () => string | undefined): Promise<string> {
    const subject = this.subjectOf(t, subjectToken);
    const key = cacheKey(t, subject);
    const hit = this.cache.get(key);
    if (hit && this.o.clock.now() < hit.renewAt) {
      this.cache.delete(key); // most recently used last
      this.cache.set(key, hit);
      return hit.token;
    }
    let running = this.inflight.get(key);
    if (!running) {
      running = this.exchange(t, subject, key).finally(() => this.inflight.delete(key));
      this.inflight.set(key, running);
    }
    return running;
  }

  /** Forgets `token` (the upstream refused it); a newer one stays. */
  drop(token: string): void {
    for (const [key, hit] of this.cache) if (hit.token === token) this.cache.delete(key);
  }

  private subjectOf(t: ExchangeTarget, subjectToken: () => string | undefined): string {
    const fix = "token exchange needs a caller authenticated by an OAuth access token of the identity provider (gateway.auth.oauth): connect with one";
    if (t.owner === undefined) {
      throw authFailed(
        t.server,
        `server ${t.server} exchanges each caller's own access token (auth: token_exchange), and the gateway runs without user authentication; ${fix}`,
      );
    }
    if (t.owner.issuer === STATIC_ISSUER) {
      throw authFailed(
        t.server,
        `server ${t.server} exchanges each caller's own access token (auth: token_exchange), and the static gateway token is not one; ${fix}`,
      );
    }
    const token = subjectToken();
    if (token === undefined) {
      throw authFailed(t.server, `server ${t.server} exchanges each caller's own access token (auth: token_exchange), and this session has none; ${fix}`);
    }
    return token;
  }

  private async exchange(t: ExchangeTarget, subjectToken: string, key: string): Promise<string> {
    const c = t.config;
    const oauth = await loadOAuth();
    const as = await this.authorizationServer(t);
    const client: OAuth.Client = { client_id: c.clientId };
    const secret = clientSecretOf(t);
    const auth = c.clientAuth === "client_secret_post" ? oauth.ClientSecretPost(secret) : oauth.ClientSecretBasic(secret);
    const params = new URLSearchParams({
      subject_token: subjectToken,
      subject_token_type: ACCESS_TOKEN_TYPE,
      requested_token_type: c.requestedTokenType ?? ACCESS_TOKEN_TYPE,
    });
    if (c.resource !== undefined) params.set("resource", c.resource);
    if (c.audience !== undefined) params.set("audience", c.audience);
    if (c.scopes?.length) params.set("scope", c.scopes.join(" "));
    let answer: OAuth.TokenEndpointResponse;
    try {
      const res = await oauth.genericTokenEndpointRequest(as, client, auth, TOKEN_EXCHANGE_GRANT, params, httpOptions(oauth, as.token_endpoint!));
      // RFC 8693 §2.2.1: "N_A" when the issued token is not an access token (requestedTokenType names another kind).
      answer = await oauth.processGenericTokenEndpointResponse(as, client, res, { recognizedTokenTypes: { n_a: () => undefined } });
    } catch (err) {
      throw refusal(oauth, t.server, as.token_endpoint!, err, subjectToken);
    }
    const now = this.o.clock.now();
    const expiresAt = answer.expires_in === undefined ? undefined : now + answer.expires_in * 1000;
    // Without expires_in the token is used for this request only: when it lapses is unknown.
    const renewAt = expiresAt === undefined ? now : expiresAt - this.o.refreshAheadMs;
    if (renewAt > now) {
      this.cache.delete(key);
      this.cache.set(key, { token: answer.access_token, renewAt });
      for (const oldest of this.cache.keys()) {
        if (this.cache.size <= this.maxCached) break;
        this.cache.delete(oldest);
      }
    }
    this.o.logger.debug(
      { server: t.server, principalHash: t.owner ? principalHash(t.owner.issuer, t.owner.subject) : undefined, expiresInS: answer.expires_in },
      "upstream_token_exchanged",
    );
    return answer.access_token;
  }

  private authorizationServer(t: ExchangeTarget): Promise<OAuth.AuthorizationServer> {
    const { issuer, tokenEndpoint } = t.config;
    if (tokenEndpoint !== undefined) return Promise.resolve({ issuer: tokenEndpoint, token_endpoint: tokenEndpoint });
    const id = issuer!;
    let found = this.servers.get(id);
    if (!found) {
      found = this.discover(t.server, id);
      this.servers.set(id, found);
      found.catch(() => this.servers.delete(id));
    }
    return found;
  }

  /** RFC 8414 metadata, else OpenID Connect discovery; the issuer must match exactly and name a token endpoint. */
  private async discover(server: string, issuer: string): Promise<OAuth.AuthorizationServer> {
    const oauth = await loadOAuth();
    const url = new URL(issuer);
    const problems: string[] = [];
    for (const algorithm of ["oauth2", "oidc"] as const) {
      try {
        const as = await oauth.processDiscoveryResponse(url, await oauth.discoveryRequest(url, { algorithm, ...httpOptions(oauth, issuer) }));
        if (as.token_endpoint !== undefined) return as;
        problems.push(`${algorithm === "oidc" ? "OpenID" : "RFC 8414"} metadata names no token_endpoint`);
      } catch (err) {
        problems.push(`${algorithm === "oidc" ? "OpenID" : "RFC 8414"} discovery: ${errorMessage(err)}`);
      }
    }
    throw authFailed(
      server,
      `server ${server}: the identity provider ${issuer} (auth.issuer) could not be used for token exchange (${problems.join("; ")}); check the issuer, or name its "tokenEndpoint" instead`,
    );
  }
}

function httpOptions(oauth: typeof OAuth, url: string): { signal: AbortSignal; [OAuth.allowInsecureRequests]?: boolean } {
  // The operator named this URL; plain http is theirs to choose (a loopback identity provider, tests).
  return { signal: AbortSignal.timeout(30_000), ...(url.startsWith("http://") ? { [oauth.allowInsecureRequests]: true } : {}) };
}

/** `factory` whose remote fetch sends the caller's exchanged token; unchanged unless `config` has `auth: token_exchange`. */
export function withTokenExchange(
  factory: TransportFactory,
  config: ServerConfig,
  server: string,
  owner: { issuer: string; subject: string } | undefined,
  subjectToken: () => string | undefined,
  exchanges: TokenExchanges,
): TransportFactory {
  if (isStdioConfig(config) || config.tokenExchange === undefined) return factory;
  const te = config.tokenExchange;
  // Neither resource nor audience named: the token is asked for the server's URL (RFC 8707, as MCP's own OAuth does).
  const exchange = te.resource === undefined && te.audience === undefined ? { ...te, resource: config.url } : te;
  const target: ExchangeTarget = { server, config: exchange, owner: owner && { issuer: owner.issuer, subject: owner.subject } };
  return (name, c, options) => factory(name, c, { ...options, authFetch: (base) => exchanges.fetchFor(target, subjectToken, base) });
}

/** Whether `config` exchanges the caller's token (such connections are one principal's: principalBound). */
export function isTokenExchange(config: ServerConfig): boolean {
  return !isStdioConfig(config) && config.tokenExchange !== undefined;
}

function cacheKey(t: ExchangeTarget, subjectToken: string): string {
  // The config is part of the key: a reload that changes the audience or scopes never reuses an older token. So is the
  // inbound token (hashed): one person's low-scope client never gets what the provider granted their high-scope one.
  const inbound = createHash("sha256").update(subjectToken).digest("base64url");
  return JSON.stringify([t.server, t.owner?.issuer ?? "", t.owner?.subject ?? "", inbound, t.config]);
}

function clientSecretOf(t: ExchangeTarget): string {
  const { clientSecret, clientSecretFile } = t.config;
  if (clientSecret !== undefined) return clientSecret;
  try {
    const secret = readFileSync(clientSecretFile!, "utf8").trim();
    if (secret !== "") return secret;
    throw new Error("the file is empty");
  } catch (err) {
    throw authFailed(
      t.server,
      `server ${t.server}: cannot read auth.clientSecretFile ${clientSecretFile} (${errorMessage(err)}); write the gateway's client secret at the identity provider there`,
    );
  }
}

function authFailed(server: string, message: string, details: Record<string, unknown> = {}): GatewayError {
  return new GatewayError(ErrorCodes.UPSTREAM_AUTH_FAILED, message, { details: { server, ...details } });
}

/** What the identity provider's refusal means for the operator or the person; bounded, without control characters or the token. */
function refusal(oauth: typeof OAuth, server: string, endpoint: string, err: unknown, subjectToken: string): GatewayError {
  const clean = (s: string, max: number) =>
    s
      .split(subjectToken)
      .join("[token]")
      // eslint-disable-next-line no-control-regex
      .replace(/[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2060-\u206f]/g, " ")
      .slice(0, max);
  if (err instanceof oauth.ResponseBodyError) {
    const code = clean(err.error, 64);
    const said = err.error_description ? ` (${JSON.stringify(clean(err.error_description, 300))})` : "";
    const fix = REFUSAL_FIXES[err.error] ?? "see the identity provider's log for why";
    return authFailed(server, `server ${server}: the identity provider refused the token exchange at ${endpoint}: ${code}${said}; ${fix}`, {
      error: code,
    });
  }
  if (err instanceof GatewayError) return err;
  return authFailed(
    server,
    `server ${server}: the token exchange at ${endpoint} failed (${clean(errorMessage(err), 300)}); check that the identity provider is reachable and supports RFC 8693 token exchange`,
  );
}

const REFUSAL_FIXES: Record<string, string> = {
  invalid_grant:
    "the caller's access token was not accepted for exchange (expired, revoked, or not issued by this provider): get a new token from the identity provider, or check auth.issuer",
  invalid_target: "the identity provider does not issue tokens for this upstream: check auth.resource / auth.audience, or allow it at the identity provider",
  invalid_scope: "check auth.scopes against what the identity provider grants for this upstream",
  invalid_client: "the gateway's client was refused: check auth.clientId and its secret (auth.clientSecret / clientSecretFile)",
  unauthorized_client: "allow the token-exchange grant (urn:ietf:params:oauth:grant-type:token-exchange) for auth.clientId at the identity provider",
  unsupported_grant_type: "the identity provider does not support RFC 8693 token exchange: enable it, or use another auth type",
  invalid_request: "check auth.requestedTokenType, auth.resource and auth.audience",
};
