/**
 * The console's OpenID Connect login (gateway.console.oidc): authorization
 * code + PKCE with `openid-client`, against the same issuer as the MCP
 * endpoints by default. A started login (state, nonce, PKCE verifier, the
 * hash of its browser-binding cookie) is kept in the store (LoginStateStore:
 * expiring, bounded, taken once), so it may come back to any replica; the
 * callback is refused unless the browser brings the binding cookie set when
 * the login started (login CSRF). A finished login (the console session
 * behind the cookie) lives in this replica's memory, bounded and expiring.
 * The person's role comes from an ID token claim mapped in config (roleOf).
 * See docs/adr/0021-console-oidc-login.md.
 */
import { randomBytes } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type * as OpenId from "openid-client";
import type { Clock } from "../clock.js";
import type { GatewaySettings } from "../config/schema.js";
import { ErrorCodes, GatewayError, errorMessage } from "../errors.js";
import { makePrincipal, type Principal } from "../auth/principal.js";
import type { LoginStateStore } from "../store/contracts.js";
import { CONSOLE_COOKIE, LOGIN_BINDING_COOKIE, bindingHash, newLoginBinding, readCookie } from "./cookies.js";
import { secretEquals } from "../auth/secret.js";

export type ConsoleOidcSettings = GatewaySettings["console"]["oidc"];
export type ConsoleRole = "viewer" | "answerer" | "admin";

/** Who is using the console: a person (principal) with a role, or the static token's operator (no principal, admin). */
export interface ConsoleUser {
  principal: Principal | undefined;
  role: ConsoleRole;
}

interface ConsoleSession {
  user: ConsoleUser;
  expiresAt: number;
}

const RANK: Record<ConsoleRole, number> = { viewer: 1, answerer: 2, admin: 3 };

/** openid-client, loaded at the first login (docs/adr/0039): a console without OIDC, or not yet used, never loads it. */
let openIdClient: Promise<typeof OpenId> | undefined;
const loadOpenId = (): Promise<typeof OpenId> => (openIdClient ??= import("openid-client"));

export class ConsoleOidc {
  readonly #settings: ConsoleOidcSettings;
  readonly #issuer: string;
  readonly #clock: Clock;
  /** The store's started logins (a getter: the store opens at the gateway's start, after this is made). */
  readonly #logins: () => LoginStateStore;
  #config: Promise<OpenId.Configuration> | undefined;
  /** Insertion order is age order: the first entry is the oldest. */
  readonly #sessions = new Map<string, ConsoleSession>();

  constructor(settings: ConsoleOidcSettings, fallbackIssuer: string | undefined, clock: Clock, logins: () => LoginStateStore) {
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
    this.#logins = logins;
  }

  /** Discovery, once (again after a failure). */
  #configuration(): Promise<OpenId.Configuration> {
    this.#config ??= loadOpenId()
      .then((client) =>
        client.discovery(new URL(this.#issuer), this.#settings.clientId!, this.#settings.clientSecret, undefined, {
          execute: new URL(this.#issuer).protocol === "http:" ? [client.allowInsecureRequests] : [],
        }),
      )
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

  /**
   * Starts a login: the provider's authorization URL to send the browser to,
   * and the binding value to set as its login-binding cookie (the store
   * keeps only its hash).
   */
  async start(redirectUri: string, next: string): Promise<{ url: URL; binding: string }> {
    const config = await this.#configuration();
    const client = await loadOpenId();
    const now = this.#clock.now();
    this.#sweep(now);
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const nonce = client.randomNonce();
    const binding = newLoginBinding();
    await this.#logins().put(
      { state, verifier, nonce, bindingHash: bindingHash(binding), next, redirectUri, createdAt: now, expiresAt: now + this.#settings.loginTtlMs },
      this.#settings.maxPendingLogins,
    );
    const scope = [...new Set(["openid", ...this.#settings.scopes])].join(" ");
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: redirectUri,
      scope,
      state,
      nonce,
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: "S256",
    });
    return { url, binding };
  }

  /**
   * Finishes a login at the callback URL: the state must be one a console
   * started (taken from the store once, on any replica), the request must
   * carry that login's binding cookie (the browser that started it), the code
   * is redeemed with its verifier and the ID token checked (signature,
   * issuer, audience, nonce, expiry). Returns the new console session's id
   * (a fresh one at every login) and where to go.
   */
  async finish(callbackUrl: URL, cookieHeader: string | undefined): Promise<{ sessionId: string; user: ConsoleUser; next: string }> {
    const fail = (why: string, cause?: unknown): never => {
      throw new GatewayError(ErrorCodes.CONSOLE_LOGIN_FAILED, `${why}; start the login again at /console/login`, cause === undefined ? {} : { cause });
    };
    const state = callbackUrl.searchParams.get("state") ?? "";
    const now = this.#clock.now();
    this.#sweep(now);
    // Taken once, whatever happens next: a replayed callback finds nothing.
    const started = state === "" ? undefined : await this.#logins().take(state, now);
    if (!started) return fail("this login is unknown or expired (its state is not one this console started, or was already used)");
    const binding = readCookie(cookieHeader, LOGIN_BINDING_COOKIE);
    if (binding === undefined || binding === "" || !secretEquals(bindingHash(binding), started.bindingHash)) {
      return fail(
        "this login was not started in this browser (its login cookie is missing or does not match): a login link from someone else is never completed",
      );
    }
    const providerError = callbackUrl.searchParams.get("error");
    if (providerError !== null)
      return fail(`the OpenID provider refused the login: ${providerError} ${callbackUrl.searchParams.get("error_description") ?? ""}`.trim());
    const config = await this.#configuration();
    // openid-client compares the callback URL's origin and path with the redirect_uri sent: give it that one (the request's own may be behind a proxy).
    const current = new URL(started.redirectUri);
    current.search = callbackUrl.search;
    let claims: OpenId.IDToken | undefined;
    try {
      const client = await loadOpenId();
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

  get sessions(): number {
    return this.#sessions.size;
  }

  #sweep(now: number): void {
    for (const [id, s] of this.#sessions) if (s.expiresAt <= now) this.#sessions.delete(id);
  }
}
