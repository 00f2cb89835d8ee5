/**
 * The seam between the upstream factory and the OAuth client: a transport
 * factory whose remote fetch sends one principal's access token, for servers
 * with `auth` (others unchanged). Without a principal (no authentication on)
 * the gateway's one anonymous identity holds the grant.
 */
import type { ServerConfig } from "../../config/server-entry.js";
import { isStdioConfig } from "../../config/server-entry.js";
import { ErrorCodes, GatewayError } from "../../errors.js";
import type { TransportFactory } from "../transport-types.js";
import type { UpstreamOAuth } from "./upstream-oauth.js";

/** Who holds an upstream grant when the gateway runs without authentication. */
export const ANONYMOUS = Object.freeze({ issuer: "urn:emceepee:anonymous", subject: "anonymous" });

export function withPrincipalAuth(
  factory: TransportFactory,
  config: ServerConfig,
  server: string,
  principal: { issuer: string; subject: string } | undefined,
  oauth: (() => UpstreamOAuth) | undefined,
): TransportFactory {
  if (isStdioConfig(config) || config.auth === undefined) return factory;
  const { auth, url } = config;
  const owner = principal ? { issuer: principal.issuer, subject: principal.subject } : ANONYMOUS;
  return (name, c, options) =>
    factory(name, c, {
      ...options,
      authFetch: (base) => {
        if (!oauth) {
          throw new GatewayError(
            ErrorCodes.VAULT_UNAVAILABLE,
            `server ${server} needs per-person OAuth credentials, which need the vault: set EMCEEPEE_VAULT_KEY (or gateway.vault.keys / keyFile), e.g. from \`openssl rand -base64 32\``,
            { details: { server } },
          );
        }
        return oauth().fetchFor({ owner, upstream: server, url, config: auth }, base);
      },
    });
}
