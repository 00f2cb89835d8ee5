/**
 * The SDK's OAuthClientProvider for one (principal, upstream): what the SDK's
 * `auth()` orchestrator (discovery, registration, PKCE, code exchange,
 * refresh; @modelcontextprotocol/sdk/client/auth.js) reads and writes, kept
 * in the vault and the flow store instead of a browser's storage. It adds
 * what the SDK leaves to the caller: the discovered authorization server
 * must echo its issuer exactly (RFC 8414 §3.3) and advertise PKCE S256 (the
 * MCP spec's MUST; the SDK accepts metadata that names no method).
 */
import { randomBytes } from "node:crypto";
import type { OAuthClientProvider, OAuthDiscoveryState } from "@modelcontextprotocol/sdk/client/auth.js";
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import type { Clock } from "../../clock.js";
import { ErrorCodes, GatewayError } from "../../errors.js";
import type { CredentialKey, OAuthFlowStore } from "../../store/contracts.js";
import type { CredentialVault } from "./vault.js";

/** A server entry's `auth` (config/server-entry.ts). */
export interface UpstreamOAuthConfig {
  type: "oauth";
  clientId?: string | undefined;
  clientSecret?: string | undefined;
  scopes?: string[] | undefined;
}

export interface ProviderContext {
  vault: CredentialVault;
  flows: OAuthFlowStore;
  clock: Clock;
  /** The gateway's callback URL (`<public base>/oauth/callback`). */
  redirectUrl: string;
  flowTtlMs: number;
  maxPendingFlows: number;
  /** The gateway's Client ID Metadata Document (SEP-991), when its public URL is https: the client_id for servers that advertise client_id_metadata_document_supported. */
  clientMetadataUrl?: string | undefined;
  /** Discovery results by upstream (process-wide): checked once, then reused. */
  discovery: Map<string, OAuthDiscoveryState>;
}

/** Tokens as sealed in the vault: the SDK's, with when the access token expires. */
/** `authServer`: the authorization server that issued the grant (SEP-2352: its client and refresh token are never sent to another). */
export type StoredTokens = OAuthTokens & { expires_at?: number; client?: OAuthClientInformationMixed; authServer?: string };

export const TOKENS_SLOT = "oauth";
/** A dynamic registration is the gateway's own, per upstream and authorization server (`client:<issuer>`): another server means another registration. */
export const CLIENT_SLOT = "client";

export class GatewayOAuthProvider implements OAuthClientProvider {
  /** Set by redirectToAuthorization: where the person must go. */
  authorizationUrl: URL | undefined;
  /** Offered to the SDK, which uses it as the client_id where the server advertises client_id_metadata_document_supported (else registers). */
  readonly clientMetadataUrl?: string;
  private readonly stateValue = randomBytes(32).toString("base64url");
  private verifier: string | undefined;

  constructor(
    private readonly ctx: ProviderContext,
    readonly owner: { issuer: string; subject: string },
    readonly upstream: string,
    private readonly config: UpstreamOAuthConfig,
    /** The callback's flow: its verifier and redirect URI are the ones to send (it may have started on another replica). */
    private readonly flow?: { verifier: string; redirectUri: string },
    /** A step-up: the SDK must start a new authorization rather than refresh the grant it has (which keeps its scopes); the grant stays stored. */
    private readonly stepUp = false,
  ) {
    if (ctx.clientMetadataUrl !== undefined) this.clientMetadataUrl = ctx.clientMetadataUrl;
  }

  get redirectUrl(): string {
    return this.flow?.redirectUri ?? this.ctx.redirectUrl;
  }

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: "emceepee",
      redirect_uris: [this.ctx.redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: this.config.clientSecret === undefined ? "none" : "client_secret_basic",
      application_type: "web",
      ...(this.config.scopes?.length ? { scope: this.config.scopes.join(" ") } : {}),
    } as OAuthClientMetadata;
  }

  state(): string {
    return this.stateValue;
  }

  private key(slot: string, gatewayOwn = false): CredentialKey {
    return gatewayOwn ? { issuer: "", subject: "", upstream: this.upstream, slot } : { ...this.owner, upstream: this.upstream, slot };
  }

  /** The registration slot of the authorization server discovery found (the SDK discovers before it asks for the client). */
  private clientKey(): CredentialKey {
    const as = this.ctx.discovery.get(this.upstream)?.authorizationServerUrl;
    return this.key(as === undefined ? CLIENT_SLOT : `${CLIENT_SLOT}:${trimSlash(String(as))}`, true);
  }

  async clientInformation(): Promise<OAuthClientInformationMixed | undefined> {
    if (this.config.clientId !== undefined) {
      return { client_id: this.config.clientId, ...(this.config.clientSecret === undefined ? {} : { client_secret: this.config.clientSecret }) };
    }
    // A grant is refreshed by the client it was issued to, though a step-up registered another since.
    const own = this.flow || this.stepUp ? undefined : (await this.currentTokens())?.client;
    return own ?? this.ctx.vault.get<OAuthClientInformationMixed>(this.clientKey());
  }

  /** A step-up for `scopes`: a dynamic registration made for fewer scopes is forgotten, so the SDK registers again for these (grants keep their own client). */
  async prepareStepUp(scopes: string[]): Promise<void> {
    if (this.config.clientId !== undefined) return;
    const registered = (await this.ctx.vault.get<OAuthClientInformationMixed & { scope?: string }>(this.clientKey()))?.scope;
    if (registered === undefined) return;
    const allowed = registered.split(" ");
    if (!scopes.every((s) => allowed.includes(s))) await this.ctx.vault.delete(this.clientKey());
  }

  /** Dynamic registrations only: a pre-registered client is config and never stored (the SDK's issuer stamp on it is dropped). */
  async saveClientInformation(info: OAuthClientInformationMixed): Promise<void> {
    if (this.config.clientId === undefined) await this.ctx.vault.put(this.clientKey(), info);
  }

  async tokens(): Promise<StoredTokens | undefined> {
    return this.stepUp ? undefined : this.currentTokens();
  }

  /** The stored grant, unless discovery now names another authorization server than the one that issued it (the upstream moved: SEP-2352). */
  private async currentTokens(): Promise<StoredTokens | undefined> {
    const stored = await this.storedTokens();
    const as = this.ctx.discovery.get(this.upstream)?.authorizationServerUrl;
    if (stored?.authServer !== undefined && as !== undefined && trimSlash(stored.authServer) !== trimSlash(String(as))) return undefined;
    return stored;
  }

  private storedTokens(): Promise<StoredTokens | undefined> {
    return this.ctx.vault.get<StoredTokens>(this.key(TOKENS_SLOT));
  }

  async saveTokens(tokens: OAuthTokens): Promise<void> {
    const now = this.ctx.clock.now();
    const expiresAt = tokens.expires_in === undefined ? undefined : now + tokens.expires_in * 1000;
    const previous = tokens.refresh_token === undefined ? await this.storedTokens() : undefined;
    // A refresh answer without a new refresh token keeps the old one (RFC 6749 §6).
    const client = this.config.clientId === undefined ? await this.clientInformation() : undefined;
    const as = this.ctx.discovery.get(this.upstream)?.authorizationServerUrl;
    const stored: StoredTokens = {
      ...tokens,
      ...(as !== undefined ? { authServer: String(as) } : {}),
      ...(client ? { client: { client_id: client.client_id, ...(client.client_secret ? { client_secret: client.client_secret } : {}) } } : {}),
      ...(previous?.refresh_token ? { refresh_token: previous.refresh_token } : {}),
      ...(expiresAt ? { expires_at: expiresAt } : {}),
    };
    const info = {
      ...(tokens.scope ? { scopes: tokens.scope.split(" ").filter(Boolean) } : {}),
      ...(expiresAt ? { expiresAt } : {}),
      ...(tokens.issuer ? { authIssuer: tokens.issuer } : {}),
    };
    await this.ctx.vault.put(this.key(TOKENS_SLOT), stored, info);
  }

  saveCodeVerifier(verifier: string): void {
    this.verifier = verifier;
  }

  codeVerifier(): string {
    const v = this.flow?.verifier ?? this.verifier;
    if (v === undefined) throw new GatewayError(ErrorCodes.UPSTREAM_AUTH_FAILED, "no PKCE verifier for this authorization; start it again");
    return v;
  }

  /** Stores the started flow (state → principal, upstream, authorization server, sealed verifier), then keeps the URL for the caller. */
  async redirectToAuthorization(url: URL): Promise<void> {
    const discovered = this.ctx.discovery.get(this.upstream);
    const verifier = this.verifier;
    const client = await this.clientInformation();
    if (!discovered || verifier === undefined || !client)
      throw new GatewayError(ErrorCodes.INTERNAL, "an authorization started without discovery, verifier or client");
    const now = this.ctx.clock.now();
    const sealed = this.ctx.vault.vault.seal(verifier, flowAad(this.stateValue));
    await this.ctx.flows.put(
      {
        state: this.stateValue,
        issuer: this.owner.issuer,
        subject: this.owner.subject,
        upstream: this.upstream,
        authIssuer: discovered.authorizationServerMetadata?.issuer ?? String(discovered.authorizationServerUrl),
        // RFC 9207 decided now, from the metadata this flow was started with: the callback fetches nothing (it cannot fail open).
        issRequired:
          (discovered.authorizationServerMetadata as Record<string, unknown> | undefined)?.["authorization_response_iss_parameter_supported"] === true,
        clientId: client.client_id,
        verifierSealed: sealed.sealed,
        keyId: sealed.keyId,
        redirectUri: this.ctx.redirectUrl,
        resource: url.searchParams.get("resource") ?? "",
        ...(discovered.resourceMetadataUrl !== undefined ? { resourceMetadataUrl: discovered.resourceMetadataUrl } : {}),
        scopes: (url.searchParams.get("scope") ?? "").split(" ").filter(Boolean),
        createdAt: now,
        expiresAt: now + this.ctx.flowTtlMs,
      },
      this.ctx.maxPendingFlows,
    );
    this.authorizationUrl = url;
  }

  discoveryState(): OAuthDiscoveryState | undefined {
    return this.ctx.discovery.get(this.upstream);
  }

  saveDiscoveryState(state: OAuthDiscoveryState): void {
    const meta = state.authorizationServerMetadata;
    const asUrl = String(state.authorizationServerUrl);
    if (!meta) throw authFailed(this.upstream, `the authorization server ${asUrl} publishes no metadata (RFC 8414 or OpenID Connect discovery)`);
    if (trimSlash(meta.issuer) !== trimSlash(asUrl)) {
      throw authFailed(this.upstream, `the authorization server's metadata names issuer ${meta.issuer}, not ${asUrl} where it was found (RFC 8414 §3.3)`);
    }
    if (!meta.code_challenge_methods_supported?.includes("S256")) {
      throw authFailed(
        this.upstream,
        `the authorization server ${meta.issuer} does not advertise PKCE S256 (code_challenge_methods_supported), which MCP requires`,
      );
    }
    this.ctx.discovery.set(this.upstream, state);
  }

  async invalidateCredentials(scope: "all" | "client" | "tokens" | "verifier" | "discovery"): Promise<void> {
    if (scope === "all" || scope === "tokens") await this.ctx.vault.delete(this.key(TOKENS_SLOT));
    if ((scope === "all" || scope === "client") && this.config.clientId === undefined) await this.ctx.vault.delete(this.clientKey());
    if (scope === "all" || scope === "discovery") this.ctx.discovery.delete(this.upstream);
  }
}

/** Where the gateway serves its Client ID Metadata Document (SEP-991), under its public URL. */
export const CLIENT_METADATA_PATH = "/oauth/client-metadata.json";

/** The document itself: a public client (PKCE, no secret) whose client_id is the document's own URL. */
export function clientMetadataDocument(documentUrl: string, redirectUrl: string): Record<string, unknown> {
  return {
    client_id: documentUrl,
    client_name: "emceepee",
    redirect_uris: [redirectUrl],
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
    token_endpoint_auth_method: "none",
    application_type: "web",
  };
}

/** The additional data a flow's verifier is sealed with: its state. */
export function flowAad(state: string): string {
  return JSON.stringify(["flow", state]);
}

/** A trailing "/" is the only difference RFC 8414 issuers are allowed here (`new URL()` adds one to a bare origin). */
function trimSlash(u: string): string {
  return u.endsWith("/") ? u.slice(0, -1) : u;
}

export function authFailed(upstream: string, problem: string, cause?: unknown): GatewayError {
  return new GatewayError(ErrorCodes.UPSTREAM_AUTH_FAILED, `authorizing at server ${upstream}'s OAuth server failed: ${problem}`, {
    details: { server: upstream },
    ...(cause === undefined ? {} : { cause }),
  });
}
