/**
 * Token passthrough (issue 23, docs/adr/0027-upstream-identity.md §14): for a remote server whose operator wrote
 * `auth: { type: "passthrough" }`, every request carries the caller's own inbound bearer token. The MCP
 * authorization spec forbids it by default (confused deputy; the token's audience is the gateway), so it is opt-in,
 * config-file only, and warned about at start; the token is never logged.
 */
import type { ServerConfig } from "../../config/server-entry.js";
import { isStdioConfig } from "../../config/server-entry.js";
import { ErrorCodes, GatewayError } from "../../errors.js";
import type { Logger } from "../../logging.js";
import type { TransportFactory } from "../transport-types.js";

/** Whether `config` forwards the caller's token. */
export function isPassthrough(config: ServerConfig): boolean {
  return !isStdioConfig(config) && config.passthrough === true;
}

/** The warning logged when a passthrough server is configured (at start and on reload): names the server, never a token. */
export function warnPassthrough(logger: Logger, server: string): void {
  logger.warn(
    { server },
    `server ${server} gets each caller's own access token (auth: passthrough): the upstream can act as the caller wherever that token is accepted; use it only for an upstream you trust with it`,
  );
}

/** `factory` whose remote fetch sends `bearer()` as the Authorization header; unchanged unless `config` opts in. */
export function withPassthrough(factory: TransportFactory, config: ServerConfig, server: string, bearer: () => string | undefined): TransportFactory {
  if (!isPassthrough(config)) return factory;
  return (name, c, options) =>
    factory(name, c, {
      ...options,
      authFetch: (base) => (url, init) => {
        const token = bearer();
        if (token === undefined) {
          return Promise.reject(
            new GatewayError(
              ErrorCodes.UPSTREAM_AUTH_FAILED,
              `server ${server} forwards the caller's own token (auth: passthrough), and this session has none: turn on the gateway's authentication (gateway.token or gateway.auth.oauth), or remove the passthrough`,
              { details: { server } },
            ),
          );
        }
        const headers = new Headers(init?.headers);
        headers.set("authorization", `Bearer ${token}`);
        return base(url, { ...init, headers });
      },
    });
}
