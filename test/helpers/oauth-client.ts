/** The SDK's OAuth client side for tests: its storage in memory, and a spec-following login against test/helpers/oidc.ts. */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { UnauthorizedError, type OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import { loginHeadless } from "./oidc.js";

/** An OAuth client's storage, in memory, as an app would keep it; the authorization URL is kept for loginHeadless. */
export class MemoryOAuthClient implements OAuthClientProvider {
  info: OAuthClientInformationMixed | undefined;
  saved: OAuthTokens | undefined;
  verifier = "";
  authorizationUrl: URL | undefined;
  constructor(
    private readonly redirect: string,
    preRegistered?: OAuthClientInformationMixed,
  ) {
    this.info = preRegistered;
  }
  get redirectUrl(): string {
    return this.redirect;
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: "oauth-test",
      redirect_uris: [this.redirect],
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(v: string) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
}

/** Connects as `user` the way a spec-following client does: first attempt → 401 → login → finishAuth → connect again. */
export async function loginAndConnect(url: string, user: string, oauth: MemoryOAuthClient): Promise<{ client: Client; sessionId: string }> {
  const first = new StreamableHTTPClientTransport(new URL(url), { authProvider: oauth });
  await assert.rejects(new Client({ name: "oauth-test", version: "1" }).connect(first), UnauthorizedError);
  assert.ok(oauth.authorizationUrl, "the SDK found the authorization endpoint through discovery");
  await first.finishAuth(await loginHeadless(oauth.authorizationUrl, user, oauth.redirectUrl));
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: oauth });
  const client = new Client({ name: "oauth-test", version: "1" });
  await client.connect(transport);
  return { client, sessionId: transport.sessionId ?? "" };
}
