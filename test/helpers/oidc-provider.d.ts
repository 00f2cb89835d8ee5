/** The few parts of oidc-provider 9 (which ships no types) that test/helpers/oidc.ts uses. */
declare module "oidc-provider" {
  import type { RequestListener } from "node:http";
  export type ClientMetadata = Record<string, unknown> & { client_id: string };
  export interface ResourceServer {
    scope: string;
    audience?: string;
    accessTokenTTL?: number;
    accessTokenFormat?: "jwt" | "opaque";
    jwt?: { sign?: { alg: string } };
  }
  export interface Configuration {
    clients?: ClientMetadata[];
    jwks?: { keys: object[] };
    scopes?: string[];
    cookies?: { keys: string[] };
    clientDefaults?: Record<string, unknown>;
    renderError?: (ctx: { type: string; body: string }, out: Record<string, string>, error: unknown) => void;
    findAccount?: (ctx: unknown, id: string) => { accountId: string; claims(): Record<string, unknown> };
    pkce?: { required: (ctx: unknown, client: unknown) => boolean };
    claims?: Record<string, string[]>;
    conformIdTokenClaims?: boolean;
    features?: Record<string, unknown> & {
      resourceIndicators?: {
        enabled: boolean;
        defaultResource?: (ctx: unknown, client: unknown, oneOf?: string[]) => string | string[];
        useGrantedResource?: (ctx: unknown, model: unknown) => boolean;
        getResourceServerInfo?: (ctx: unknown, resourceIndicator: string, client: unknown) => ResourceServer;
      };
    };
  }
  /** A token endpoint request's context, as a registered grant's handler sees it. */
  export interface KoaContextWithOIDC {
    oidc: { params: Record<string, unknown>; client?: unknown };
    body: unknown;
  }
  /** OAuth errors a grant handler throws (the token endpoint answers them as `error` / `error_description`). */
  export const errors: Record<"InvalidRequest" | "InvalidGrant" | "InvalidTarget", new (description?: string) => Error>;
  export default class Provider {
    constructor(issuer: string, configuration?: Configuration);
    callback(): RequestListener;
    on(event: string, listener: (...args: unknown[]) => void): this;
    /** An extension grant at the token endpoint (e.g. RFC 8693 token exchange): its parameters, and those that may repeat. */
    registerGrantType(name: string, handler: (ctx: KoaContextWithOIDC) => Promise<void>, params?: string[], dupes?: string[]): void;
    /** The access token model: `save()` gives the token's value (a JWT for a resource server with accessTokenFormat "jwt"). */
    AccessToken: new (o: Record<string, unknown>) => { save(): Promise<string> };
  }
}
