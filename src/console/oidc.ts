/**
 * The console's OpenID Connect login (gateway.console.oidc): authorization
 * code + PKCE with `openid-client`, against the same issuer as the MCP
 * endpoints by default. A started login (state, nonce, PKCE verifier) and a
 * finished one (the console session behind the cookie) are kept in this
 * replica's memory, bounded and expiring: a login must come back to the
 * replica that started it, and a console session lives on the replica that
 * made it (a restart logs people out). The person's role comes from an ID
 * token claim mapped in config (roleOf).
 */
import { randomBytes } from "node:crypto";
import type { IncomingMessage } from "node:http";
import * as client from "openid-client";
import type { Clock } from "../clock.js";
import type { GatewaySettings } from "../config/schema.js";
import { ErrorCodes, GatewayError, errorMessage } from "../errors.js";
import { makePrincipal, type Principal } from "../auth/principal.js";
import { CONSOLE_COOKIE, readCookie } from "./cookies.js";

export type ConsoleOidcSettings = GatewaySettings["console"]["oidc"];
export type ConsoleRole = "viewer" | "answerer" | "admin";

/** Who is using the console: a person (principal) with a role, or the static token's operator (no principal, admin). */
export interface ConsoleUser {
  principal: Principal | undefined;
  role: ConsoleRole;
}

interface StartedLogin {
  verifier: string;
  nonce: string;
  next: string;
  redirectUri: string;
  expiresAt: number;
}

interface ConsoleSession {
  user: ConsoleUser;
  expiresAt: number;
}

const RANK: Record<ConsoleRole, number> = { viewer: 1, answerer: 2, admin: 3 };

export class ConsoleOidc {
  readonly #settings: ConsoleOidcSettings;
  readonly #issuer: string;
  readonly #clock: Clock;
  #config: Promise<client.Configuration> | undefined;
  /** Insertion order is age order: the first entry is the oldest. */
  readonly #started = new Map<string, StartedLogin>();
  readonly #sessions = new Map<string, ConsoleSession>();

  constructor(settings: ConsoleOidcSettings, fallbackIssuer: string | undefined, clock: Clock) {
    this.#settings = settings;
    const issuer = settings.issuer ?? fallbackIssuer;
    if (issuer === undefined) {
      throw new GatewayError(
        ErrorCodes.CONFIG_INVALID,
        'gateway.console.oidc needs an issuer: set console.oidc.issuer, or auth.oauth.issuers (the console then uses the first), e.g. "https://login.example.com"',
      );
    }
    this.#issuer = issuer;
    this.#clock = clock;
  }

  /** Discovery, once (again after a failure). */
  #configuration(): Promise<client.Configuration> {
    this.#config ??= client
      .discovery(new URL(this.#issuer), this.#settings.clientId!, this.#settings.clientSecret, undefined, {
        execute: new URL(this.#issuer).protocol === "http:" ? [client.allowInsecureRequests] : [],
      })
      .catch((err: unknown) => {
        this.#config = undefined;
        throw new GatewayError(
          ErrorCodes.CONSOLE_LOGIN_FAILED,
          `the console could not read the OpenID provider's metadata at ${this.#issuer}: ${errorMessage(err)}; try again`,
          {
            cause: err,
          },
        );
      });
    return this.#config;
  }

  /** Starts a login: the provider's authorization URL to send the browser to. */
  async start(redirectUri: string, next: string): Promise<URL> {
    const config = await this.#configuration();
    const now = this.#clock.now();
    this.#sweep(now);
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const nonce = client.randomNonce();
    while (this.#started.size >= this.#settings.maxPendingLogins) this.#started.delete(this.#started.keys().next().value!);
    this.#started.set(state, { verifier, nonce, next, redirectUri, expiresAt: now + this.#settings.loginTtlMs });
    const scope = [...new Set(["openid", ...this.#settings.scopes])].join(" ");
    return client.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      scope,
      state,
      nonce,
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: "S256",
    });
  }

  /**
   * Finishes a login at the callback URL: the state must be one this replica
   * started (used once), the code is redeemed with its verifier and the ID
   * token checked (signature, issuer, audience, nonce, expiry). Returns the
   * new console session's id (a fresh one at every login) and where to go.
   */
  async finish(callbackUrl: URL): Promise<{ sessionId: string; user: ConsoleUser; next: string }> {
    const fail = (why: string, cause?: unknown): never => {
      throw new GatewayError(ErrorCodes.CONSOLE_LOGIN_FAILED, `${why}; start the login again at /console/login`, cause === undefined ? {} : { cause });
    };
    const state = callbackUrl.searchParams.get("state") ?? "";
    const now = this.#clock.now();
    this.#sweep(now);
    const started = this.#started.get(state);
    if (!started) return fail("this login is unknown or expired (its state is not one this console started, or was already used)");
    this.#started.delete(state); // once only, whatever happens next
    const providerError = callbackUrl.searchParams.get("error");
    if (providerError !== null)
      return fail(`the OpenID provider refused the login: ${providerError} ${callbackUrl.searchParams.get("error_description") ?? ""}`.trim());
    const config = await this.#configuration();
    // openid-client compares the callback URL's origin and path with the redirect_uri sent: give it that one (the request's own may be behind a proxy).
    const current = new URL(started.redirectUri);
    current.search = callbackUrl.search;
    let claims: client.IDToken | undefined;
    try {
      const tokens = await client.authorizationCodeGrant(config, current, {
        pkceCodeVerifier: started.verifier,
        expectedState: state,
        expectedNonce: started.nonce,
        idTokenExpected: true,
      });
      claims = tokens.claims();
    } catch (err) {
      // openid-client's message is generic; its cause (oauth4webapi's error) names the claim that failed (nonce, iss, aud, …).
      const cause = (err as { cause?: unknown }).cause;
      const which = cause instanceof Error && cause.message !== errorMessage(err) ? ` (${cause.message})` : "";
      return fail(`the login could not be completed: ${errorMessage(err)}${which}`, err);
    }
    if (!claims) return fail("the OpenID provider sent no ID token");
    const role = this.roleOf(claims);
    if (role === undefined) return fail(`no console role is mapped for this account (claim '${this.#settings.roleClaim}'); ask the gateway's operator`);
    const user: ConsoleUser = { principal: makePrincipal({ issuer: claims.iss, subject: claims.sub, scopes: [], claims }), role };
    while (this.#sessions.size >= this.#settings.maxSessions) this.#sessions.delete(this.#sessions.keys().next().value!);
    const sessionId = randomBytes(32).toString("base64url");
    this.#sessions.set(sessionId, { user, expiresAt: now + this.#settings.sessionTtlMs });
    return { sessionId, user, next: started.next };
  }

  /** The highest role the claims map to, else the default (undefined: "none"). */
  roleOf(claims: Record<string, unknown>): ConsoleRole | undefined {
    const raw = claims[this.#settings.roleClaim];
    const values = typeof raw === "string" ? raw.split(" ") : Array.isArray(raw) ? raw.filter((v): v is string => typeof v === "string") : [];
    let best: ConsoleRole | undefined;
    for (const role of ["viewer", "answerer", "admin"] as const) {
      if (this.#settings.roles[role].some((v) => values.includes(v)) && (!best || RANK[role] > RANK[best])) best = role;
    }
    if (best) return best;
    return this.#settings.defaultRole === "none" ? undefined : this.#settings.defaultRole;
  }

  /** The person behind the request's console cookie, if it names a live console session. */
  user(req: IncomingMessage): ConsoleUser | undefined {
    const id = readCookie(req.headers.cookie, CONSOLE_COOKIE);
    const session = id === undefined ? undefined : this.#sessions.get(id);
    if (!session) return undefined;
    if (session.expiresAt <= this.#clock.now()) {
      this.#sessions.delete(id!);
      return undefined;
    }
    return session.user;
  }

  /** Ends the request's console session (logout, and the old one at a new login). */
  end(req: IncomingMessage): void {
    const id = readCookie(req.headers.cookie, CONSOLE_COOKIE);
    if (id !== undefined) this.#sessions.delete(id);
  }

  /** Started logins not yet finished (tests). */
  get pendingLogins(): number {
    return this.#started.size;
  }

  get sessions(): number {
    return this.#sessions.size;
  }

  #sweep(now: number): void {
    for (const [state, s] of this.#started) if (s.expiresAt <= now) this.#started.delete(state);
    for (const [id, s] of this.#sessions) if (s.expiresAt <= now) this.#sessions.delete(id);
  }
}
