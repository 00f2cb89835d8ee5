/**
 * The gateway's upstream identity parts from its settings (issue 23): the
 * vault when keys are configured (else none: servers with `auth` then fail
 * with EMCP_VAULT_UNAVAILABLE), the OAuth client made on first use (the
 * store opens in start()), the callback's completer, and the re-seal run at
 * start after a key rotation.
 */
import type { Clock } from "../../clock.js";
import type { GatewaySettings } from "../../config/schema.js";
import { isStdioConfig } from "../../config/server-entry.js";
import type { Store } from "../../store/contracts.js";
import type { ServerRegistry } from "../registry.js";
import { loadKeys } from "./keyring.js";
import { UpstreamOAuth, type UpstreamAuthTarget } from "./upstream-oauth.js";
import { CredentialVault, Vault } from "./vault.js";

/** Where the authorization server sends the person back (console/upstream-auth.ts serves it). */
export const CALLBACK_PATH = "/console/oauth/callback";

export interface UpstreamAuth {
  /** The OAuth client (made on first use). */
  oauth: () => UpstreamOAuth;
  /** Completes a callback for a person, with the servers as configured now. */
  completer(registry: ServerRegistry): { complete(query: URLSearchParams, person: { issuer: string; subject: string }): Promise<{ upstream: string }> };
  /** Re-seals credentials of older keys; returns how many. */
  reseal(): Promise<number>;
}

export function createUpstreamAuth(
  settings: GatewaySettings,
  deps: { clock: Clock; store: () => Store; base: () => string | undefined },
): UpstreamAuth | undefined {
  const keys = loadKeys(settings.vault);
  if (!keys) return undefined;
  const vault = new Vault(keys);
  const credentials = () => new CredentialVault(vault, deps.store().credentials, () => deps.clock.now());
  let oauth: UpstreamOAuth | undefined;
  const client = () =>
    (oauth ??= new UpstreamOAuth({
      vault: credentials(),
      flows: deps.store().oauthFlows,
      clock: deps.clock,
      redirectUrl: `${(settings.http.publicUrl ?? deps.base() ?? `http://${settings.host}:${settings.port}`).replace(/\/$/, "")}${CALLBACK_PATH}`,
      flowTtlMs: settings.vault.flowTtlMs,
      maxPendingFlows: settings.vault.maxPendingFlows,
      refreshAheadMs: settings.vault.refreshAheadMs,
    }));
  return {
    oauth: client,
    completer: (registry) => ({
      complete: (query, person) =>
        client().complete(query, person, (upstream): UpstreamAuthTarget | undefined => {
          const config = registry.get(upstream)?.config;
          if (!config || isStdioConfig(config) || !config.auth) return undefined;
          return { owner: person, upstream, url: config.url, config: config.auth };
        }),
    }),
    reseal: () => credentials().reseal(),
  };
}
