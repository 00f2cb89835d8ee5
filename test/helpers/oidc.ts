/**
 * A real OpenID provider for the tests: `oidc-provider` (the certified Node
 * implementation) on a loopback port, issuing JWT access tokens (RFC 9068)
 * for whatever resource a client names (RFC 8707), with dynamic client
 * registration, PKCE, introspection and its dev login/consent pages, which
 * loginHeadless() drives with fetch and a cookie jar the way a person's
 * browser would. startIdentityStack(): the provider with the console's client,
 * an OAuth-protected upstream and a gateway in front (the consent tests' stack).
 */
import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair } from "jose";
import Provider, { type ClientMetadata } from "oidc-provider";
import type { GatewayDeps } from "../../src/server/gateway.js";
import { startProtectedServer, type ProtectedServer } from "../fixtures/oauth-protected-server.js";
import { freePort } from "./core-extra.js";
import { startGateway, type TestGateway } from "./gateway.js";

export interface OidcOptions {
  /** Scopes the provider grants for every resource (besides openid, offline_access). */
  scopes?: string[];
  /** Clients known before any registration (e.g. a pre-registered public client). */
  clients?: ClientMetadata[];
  /** Access token format per resource: "jwt" (default) or "opaque" (for introspection). */
  format?: (resource: string) => "jwt" | "opaque";
  /** Access token lifetime, seconds. @default 600 */
  accessTokenTTL?: number;
  /** Claims of each account besides `sub` (e.g. roles), put in its ID token when the `roles` scope is asked for. */
  accountClaims?: (id: string) => Record<string, unknown>;
  /** Loopback port to listen on (examples/oauth/provider.ts uses a fixed one). @default 0, any free port */
  port?: number;
  /** Awaited before the provider sees each request (a test's gate, e.g. holding token requests to order a race). */
  intercept?: (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void>;
}

export interface TestOidcProvider {
  issuer: string;
  provider: Provider;
  close(): Promise<void>;
}

export async function startOidcProvider(o: OidcOptions = {}): Promise<TestOidcProvider> {
  let handler: http.RequestListener = (_req, res) => res.writeHead(503).end();
  const server = http.createServer((req, res) => {
    if (!o.intercept) return handler(req, res);
    void o.intercept(req, res).then(() => handler(req, res));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject); // e.g. a fixed port already in use
    server.listen(o.port ?? 0, "127.0.0.1", resolve);
  });
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const { privateKey } = await generateKeyPair("ES256", { extractable: true });
  const scopes = o.scopes ?? [];
  const provider = new Provider(issuer, {
    clients: o.clients ?? [],
    jwks: { keys: [{ ...(await exportJWK(privateKey)), alg: "ES256", use: "sig", kid: "test-key-1" }] },
    scopes: ["openid", "offline_access", "roles", ...scopes],
    cookies: { keys: ["oidc-test-cookie-key-0123456789"] },
    // Its one key is an ES256 key: clients default to it too.
    clientDefaults: { id_token_signed_response_alg: "ES256" },
    renderError: (ctx: { type: string; body: string }, out: Record<string, string>) => {
      ctx.type = "text/plain";
      ctx.body = `${out.error ?? "error"}: ${out.error_description ?? ""}`;
    },
    findAccount: (_ctx, id) => ({ accountId: id, claims: () => ({ ...o.accountClaims?.(id), sub: id }) }),
    // The `roles` scope's claim goes into the ID token too (not only userinfo), as the console reads it there.
    claims: { openid: ["sub"], roles: ["roles"] },
    conformIdTokenClaims: false,
    pkce: { required: () => true },
    features: {
      devInteractions: { enabled: true },
      registration: { enabled: true },
      introspection: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => undefined as unknown as string,
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx, resource) => ({
          scope: scopes.join(" "),
          audience: resource,
          accessTokenTTL: o.accessTokenTTL ?? 600,
          accessTokenFormat: o.format?.(resource) ?? "jwt",
          ...(o.format?.(resource) === "opaque" ? {} : { jwt: { sign: { alg: "ES256" } } }),
        }),
      },
    },
  });
  handler = provider.callback();
  return {
    issuer,
    provider,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * Logs `user` in at `authorizationUrl` as a browser would: follows the
 * provider's redirects with a cookie jar, fills the dev login form (any
 * password) and confirms the consent page, and returns the `code` the
 * provider sends to the client's redirect URI.
 */
export async function loginHeadless(authorizationUrl: URL | string, user: string, redirectUri: string): Promise<string> {
  const back = await followAuthorization(authorizationUrl, user, redirectUri);
  const code = back.searchParams.get("code");
  if (code === null) throw new Error(`the provider sent back no code: ${back.href}`);
  return code;
}

/** As loginHeadless, but returns the whole URL the provider sends the browser back to (code, state, iss). */
export async function followAuthorization(authorizationUrl: URL | string, user: string, redirectUri: string): Promise<URL> {
  const jar = new Map<string, string>();
  const request = async (url: string, init: RequestInit = {}): Promise<Response> => {
    const res = await fetch(url, {
      ...init,
      redirect: "manual",
      headers: { ...(init.headers as Record<string, string>), cookie: [...jar].map(([k, v]) => `${k}=${v}`).join("; ") },
    });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(";");
      const eq = pair!.indexOf("=");
      jar.set(pair!.slice(0, eq).trim(), pair!.slice(eq + 1).trim());
    }
    return res;
  };
  let url = String(authorizationUrl);
  for (let step = 0; step < 20; step++) {
    if (url.startsWith(redirectUri)) return new URL(url);
    const res = await request(url);
    const location = res.headers.get("location");
    if (location !== null) {
      url = new URL(location, url).href;
      continue;
    }
    const page = await res.text();
    if (res.status !== 200) throw new Error(`the provider answered ${res.status} at ${url}: ${page.slice(0, 300)}`);
    // A dev interaction page: the login form (prompt=login) or the consent form (prompt=consent).
    const action = /<form[^>]*action="([^"]+)"/.exec(page)?.[1];
    const prompt = /name="prompt" value="([^"]+)"/.exec(page)?.[1];
    if (action === undefined || prompt === undefined) throw new Error(`no interaction form at ${url}: ${page.slice(0, 300)}`);
    const form = new URLSearchParams(prompt === "login" ? { prompt, login: user, password: "any" } : { prompt });
    const posted = await request(new URL(action.replace(/&amp;/g, "&"), url).href, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: form.toString(),
    });
    const next = posted.headers.get("location");
    if (next === null) throw new Error(`the provider did not redirect after ${prompt} (${posted.status}): ${(await posted.text()).slice(0, 300)}`);
    url = new URL(next, url).href;
  }
  throw new Error("the login did not reach the redirect URI within 20 steps");
}

/** A console login started at `base`'s /console/login: the provider URL, its state, and the login-binding cookie (as set, and as a Cookie header). */
export interface StartedConsoleLogin {
  authorize: URL;
  state: string;
  setCookie: string;
  cookie: string;
}

export async function startConsoleLogin(base: string, query = ""): Promise<StartedConsoleLogin> {
  const res = await fetch(`${base}/console/login${query}`, { redirect: "manual" });
  if (res.status !== 303) throw new Error(`/console/login answered ${res.status}, not 303: ${(await res.text()).slice(0, 300)}`);
  const authorize = new URL(res.headers.get("location")!);
  const setCookie = res.headers.getSetCookie().find((c) => c.startsWith("emceepee_login="));
  if (setCookie === undefined) throw new Error("/console/login set no login-binding cookie (emceepee_login)");
  return { authorize, state: authorize.searchParams.get("state")!, setCookie, cookie: setCookie.split(";")[0]! };
}

/** The console's callback URL at `base` as the provider sends the browser back to it. */
export function consoleCallbackLink(base: string, code: string, state: string, issuer?: string): string {
  return `${base}/console/callback?${new URLSearchParams({ code, state, ...(issuer ? { iss: issuer } : {}) }).toString()}`;
}

/** The console session cookie a response sets (the whole Set-Cookie line), if any. */
export function consoleSessionCookieOf(res: Response): string | undefined {
  return res.headers.getSetCookie().find((c) => c.startsWith("emceepee_console="));
}

/**
 * Logs `user` in to the console headlessly: started at `base`, the provider's
 * code sent back to `back` (another replica, or the same gateway), with the
 * provider `issuer` as `iss`. Returns the console session's Cookie header.
 */
export async function consoleLogin(base: string, user: string, issuer: string, back = base): Promise<string> {
  const started = await startConsoleLogin(base);
  const code = await loginHeadless(started.authorize, user, `${base}/console/callback`);
  const res = await fetch(consoleCallbackLink(back, code, started.state, issuer), { redirect: "manual", headers: { cookie: started.cookie } });
  const session = consoleSessionCookieOf(res);
  if (res.status !== 200 || session === undefined)
    throw new Error(`the console callback answered ${res.status} without a session cookie: ${(await res.text()).slice(0, 300)}`);
  return session.split(";")[0]!;
}

/** The console's OIDC client secret at the provider startIdentityStack() starts. */
export const CONSOLE_CLIENT_SECRET = "console-client-secret-0123456789";
/** The scope the gateway's own OAuth asks for, and the protected upstream grants (with offline_access). */
export const IDENTITY_SCOPE = "mcp:tools";

export interface IdentityStackOptions {
  /** The gateway's servers given the protected upstream's URL and its auth block. @default { remote: session-shared } */
  servers?: (url: string, auth: { type: "oauth"; scopes: string[] }) => Record<string, unknown>;
  /** More `gateway` settings (store, logLevel…) over port, auth, console and vault. */
  gateway?: Record<string, unknown>;
  /** startGateway's second argument (a logger…). */
  deps?: GatewayDeps;
  /** Other gateways' bases (another replica) whose /console/callback the provider also accepts. */
  alsoConsoleAt?: string[];
  /** The provider's request gate (OidcOptions.intercept). */
  intercept?: OidcOptions["intercept"];
}

/** The identity test stack: oidc-provider (with the console's client), an OAuth-protected upstream and a gateway in front. */
export interface IdentityStack {
  idp: TestOidcProvider;
  upstream: ProtectedServer;
  gw: TestGateway;
  /** The gateway's base URL (http://127.0.0.1:port). */
  base: string;
  /** The auth block of an upstream entry for the protected server. */
  upstreamAuth: { type: "oauth"; scopes: string[] };
  /** `gateway` settings another replica needs to share this one's identity (auth, console, vault). */
  shared: { auth: Record<string, unknown>; console: Record<string, unknown>; vault: { keys: string } };
  /** Closes the gateway, the upstream and the provider (the test closes what it added). */
  close(): Promise<void>;
}

/** Starts the identity test stack (consent, Connections, upstream identity tests share it). */
export async function startIdentityStack(o: IdentityStackOptions = {}): Promise<IdentityStack> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const idp = await startOidcProvider({
    ...(o.intercept ? { intercept: o.intercept } : {}),
    scopes: [IDENTITY_SCOPE],
    clients: [
      {
        client_id: "console",
        client_secret: CONSOLE_CLIENT_SECRET,
        redirect_uris: [base, ...(o.alsoConsoleAt ?? [])].map((b) => `${b}/console/callback`),
        token_endpoint_auth_method: "client_secret_post",
        grant_types: ["authorization_code"],
        response_types: ["code"],
      },
    ],
  });
  let upstream: ProtectedServer | undefined;
  try {
    upstream = await startProtectedServer({ issuer: idp.issuer, scopes: [IDENTITY_SCOPE, "offline_access"] });
    const upstreamAuth = { type: "oauth" as const, scopes: [IDENTITY_SCOPE, "offline_access"] };
    const shared = {
      auth: { oauth: { issuers: [idp.issuer], scopes: [IDENTITY_SCOPE] } },
      console: { oidc: { clientId: "console", clientSecret: CONSOLE_CLIENT_SECRET, scopes: ["openid"] } },
      vault: { keys: randomBytes(32).toString("base64") },
    };
    const gw = await startGateway(
      {
        mcpServers: o.servers?.(upstream.url, upstreamAuth) ?? { remote: { url: upstream.url, auth: upstreamAuth, sharing: "session" } },
        gateway: { port, ...shared, ...o.gateway },
      },
      o.deps,
    );
    const up = upstream;
    return {
      idp,
      upstream: up,
      gw,
      base,
      upstreamAuth,
      shared,
      close: async () => {
        await gw.close();
        await up.close();
        await idp.close();
      },
    };
  } catch (err) {
    await upstream?.close();
    await idp.close();
    throw err;
  }
}
