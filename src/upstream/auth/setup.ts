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
import { ErrorCodes, GatewayError } from "../../errors.js";
import type { Store } from "../../store/contracts.js";
import type { ServerRegistry } from "../registry.js";
import { loadKeys } from "./keyring.js";
import { CLIENT_METADATA_PATH, clientMetadataDocument } from "./provider.js";
import { UpstreamOAuth, type UpstreamAuthTarget } from "./upstream-oauth.js";
import { hasSecrets, UpstreamSecrets, type SecretRow } from "./secrets.js";
import { CredentialVault, Vault } from "./vault.js";

/** A JSON document the HTTP edge serves without a token (its probes take the same shape). */
export interface ServedDocument {
  status: number;
  body: Record<string, unknown>;
}

/** Where the authorization server sends the person back (console/upstream-auth.ts serves it). */
export const CALLBACK_PATH = "/console/oauth/callback";

/** The console's Connections page (console/upstream-auth.ts serves it): where a person connects and fills secret slots. */
export const CONNECTIONS_PAGE_PATH = "/console/connections";

export interface UpstreamAuth {
  /** The OAuth client (made on first use). */
  oauth: () => UpstreamOAuth;
  /** Per-user secrets (made on first use). */
  secrets: () => UpstreamSecrets;
  /** Completes a callback for a person, lists, starts and ends their connections, with the servers as configured now. */
  completer(registry: ServerRegistry): UpstreamConnections;
  /** Re-seals credentials of older keys; returns how many. */
  reseal(): Promise<number>;
  /** What the gateway serves without a token: its Client ID Metadata Document (SEP-991) when its public URL is https, else nothing. */
  documents(): Record<string, () => ServedDocument>;
}

type Person = { issuer: string; subject: string };

/** A person's connection to one server with `auth`, as the console shows it (never a token). */
export interface ConnectionRow {
  server: string;
  connected: boolean;
  scopes?: string[];
  expiresAt?: number;
}

/** What the console needs (console/upstream-auth.ts). */
export interface UpstreamConnections {
  complete(query: URLSearchParams, person: Person): Promise<{ upstream: string }>;
  connections(person: Person): Promise<ConnectionRow[]>;
  /** The authorization URL to send the person to; undefined when they are connected already. */
  connect(person: Person, server: string): Promise<string | undefined>;
  disconnect(person: Person, server: string): Promise<boolean>;
  /** The person's secret slots of config-file servers, filled or not (never a value). */
  secrets(person: Person): Promise<SecretRow[]>;
  /** Seals the person's value for a slot (BAD_ARGUMENTS for an unknown slot or an unusable value). */
  saveSecret(person: Person, server: string, slot: string, value: string): Promise<void>;
  removeSecret(person: Person, server: string, slot: string): Promise<boolean>;
}

export function createUpstreamAuth(
  settings: GatewaySettings,
  deps: {
    clock: Clock;
    store: () => Store;
    base: () => string | undefined;
    /** A person's secret for a server was saved or removed (the upstream factory drops their live connections to it). */
    secretChanged?: (server: string, person: Person) => void;
  },
): UpstreamAuth | undefined {
  const keys = loadKeys(settings.vault);
  if (!keys) return undefined;
  const vault = new Vault(keys);
  const credentials = () => new CredentialVault(vault, deps.store().credentials, () => deps.clock.now());
  const base = () => (settings.http.publicUrl ?? deps.base() ?? `http://${settings.host}:${settings.port}`).replace(/\/$/, "");
  // Client ID Metadata Documents need an https client_id (SEP-991): only behind an https public URL.
  const documentUrl = () => (settings.http.publicUrl?.startsWith("https://") ? `${base()}${CLIENT_METADATA_PATH}` : undefined);
  let oauth: UpstreamOAuth | undefined;
  const client = () =>
    (oauth ??= new UpstreamOAuth({
      vault: credentials(),
      flows: deps.store().oauthFlows,
      leases: deps.store().leases,
      clock: deps.clock,
      redirectUrl: `${base()}${CALLBACK_PATH}`,
      clientMetadataUrl: documentUrl(),
      flowTtlMs: settings.vault.flowTtlMs,
      maxPendingFlows: settings.vault.maxPendingFlows,
      refreshAheadMs: settings.vault.refreshAheadMs,
    }));
  let secrets: UpstreamSecrets | undefined;
  const secretsOf = () =>
    (secrets ??= new UpstreamSecrets({
      vault: credentials,
      credentials: () => deps.store().credentials,
      connectionsUrl: () => `${base()}${CONNECTIONS_PAGE_PATH}`,
      changed: deps.secretChanged,
    }));
  return {
    oauth: client,
    secrets: secretsOf,
    completer: (registry) => {
      // Config-file servers only: add_server cannot set secret slots.
      const withSecrets = () => registry.list().filter((e) => e.addedBy === "config" && hasSecrets(e.config));
      const slotted = (server: string) => {
        const e = registry.get(server);
        if (!e || e.addedBy !== "config" || !hasSecrets(e.config)) {
          throw new GatewayError(ErrorCodes.BAD_ARGUMENTS, `server ${JSON.stringify(server)} has no secret slots here; reload the Connections page`);
        }
        return e.config;
      };
      const target = (person: Person, upstream: string): UpstreamAuthTarget | undefined => {
        const config = registry.get(upstream)?.config;
        if (!config || isStdioConfig(config) || !config.auth) return undefined;
        return { owner: { issuer: person.issuer, subject: person.subject }, upstream, url: config.url, config: config.auth };
      };
      // Config-file servers only: a runtime server with `auth` is its adder's, listed where its session is.
      const withAuth = () => registry.list().flatMap((e) => (e.addedBy === "config" && target({ issuer: "", subject: "" }, e.name) ? [e.name] : []));
      return {
        complete: (query, person) => client().complete(query, person, (upstream) => target(person, upstream)),
        async connections(person) {
          const mine = new Map(
            (await deps.store().credentials.listByPrincipal(person.issuer, person.subject)).filter((r) => r.slot === "oauth").map((r) => [r.upstream, r]),
          );
          return withAuth().map((server) => {
            const r = mine.get(server);
            return {
              server,
              connected: r !== undefined,
              ...(r?.info?.scopes ? { scopes: r.info.scopes } : {}),
              ...(r?.info?.expiresAt ? { expiresAt: r.info.expiresAt } : {}),
            };
          });
        },
        async connect(person, server) {
          const t = target(person, server);
          if (!t) return undefined;
          try {
            await client().accessToken(t);
            return undefined;
          } catch (err) {
            const url = err instanceof GatewayError ? err.details?.["authorizationUrl"] : undefined;
            if (typeof url === "string") return url;
            throw err;
          }
        },
        disconnect: (person, server) => client().disconnect({ owner: { issuer: person.issuer, subject: person.subject }, upstream: server }),
        secrets: (person) => secretsOf().rows(person, withSecrets()),
        saveSecret: async (person, server, slot, value) => secretsOf().save(person, server, slotted(server), slot, value),
        removeSecret: async (person, server, slot) => secretsOf().remove(person, server, slotted(server), slot),
      };
    },
    reseal: () => credentials().reseal(),
    documents() {
      const url = documentUrl();
      if (url === undefined) return {};
      return { [CLIENT_METADATA_PATH]: () => ({ status: 200, body: clientMetadataDocument(url, `${base()}${CALLBACK_PATH}`) }) };
    },
  };
}
