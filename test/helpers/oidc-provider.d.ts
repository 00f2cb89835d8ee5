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
  export default class Provider {
    constructor(issuer: string, configuration?: Configuration);
    callback(): RequestListener;
    on(event: string, listener: (...args: unknown[]) => void): this;
  }
}
