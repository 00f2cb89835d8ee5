/**
 * Applying a re-read config file to a running gateway (the CLI does it on
 * SIGHUP). The servers the file gained, lost or changed are added, removed or
 * replaced for every session through the SessionManager's own operations —
 * the ones add_server / remove_server use — so sessions get the same
 * `server_added` / `server_removed` events and tasks fail the same way. A
 * changed server is removed, then added (its working tasks fail; sessions
 * reconnect on next use). Only config-file servers are touched: a server
 * added at runtime keeps its name even if the file now declares it too (the
 * entry is reported as skipped). Gateway settings are not re-applied (the
 * socket is bound, limits are in use); changedSettings() names the ones that
 * differ so the operator knows a restart is needed — except gateway.governance
 * (rules, visibility, Cedar, curation, virtual servers) and gateway.rateLimits,
 * which apply at once; sessions whose tool view that changes are told with
 * list_changed (../session/tool-views.ts, docs/adr/0024).
 */
import type { GatewayConfig, GatewaySettings } from "../config/schema.js";
import type { ServerConfig } from "../config/server-entry.js";
import { ErrorCodes, GatewayError, toToolErrorText } from "../errors.js";
import type { Curation } from "../governance/curation.js";
import type { Governance } from "../governance/governance.js";
import type { RateLimiter } from "../governance/rate-limits.js";
import type { ToolViews } from "../session/tool-views.js";
import type { SessionManager } from "../session/session-manager.js";
import { sameServerConfig, type ServerRegistry } from "../upstream/registry.js";

export interface ReloadReport {
  added: string[];
  removed: string[];
  updated: string[];
  unchanged: string[];
  /** Entries of the new file not applied, and why (a runtime-added server holds the name, or the operation failed). */
  skipped: Array<{ server: string; reason: string }>;
}

/** What a reload did, and the `gateway` settings that differ but need a restart. */
export interface GatewayReloadReport extends ReloadReport {
  settingsChanged: string[];
  /** gateway.governance re-read (its policy files too); a bad policy keeps the one in force. */
  governance?: { applied: true; policyVersion: string } | { applied: false; reason: string };
  /** Faces and sessions told `notifications/tools/list_changed` because what they see changed. */
  listChanged: number;
}

/** What a reload re-applies besides the servers (each optional: absent parts are not reloaded). */
export interface ReloadParts {
  governance?: Governance | undefined;
  curation?: Curation | undefined;
  rateLimits?: RateLimiter | undefined;
  toolViews?: ToolViews | undefined;
}

/** The gateway's reload(): one at a time (a second waits for the first), refused once `closing()`. */
export function createReloader(
  registry: ServerRegistry,
  sessions: SessionManager,
  settings: GatewaySettings,
  closing: () => boolean,
  parts: ReloadParts = {},
): (next: GatewayConfig) => Promise<GatewayReloadReport> {
  const { governance, curation, rateLimits, toolViews } = parts;
  let current = settings;
  let reloading: Promise<unknown> = Promise.resolve();
  return (next) => {
    const run = reloading.then(async (): Promise<GatewayReloadReport> => {
      if (closing()) throw new GatewayError(ErrorCodes.CLOSED, "the gateway is shutting down; the config was not reloaded");
      const report = await reloadServers(registry, sessions, next.mcpServers);
      let settingsChanged = changedSettings(current, next.gateway);
      const wasOff = current.governance.profile === "off";
      current = next.gateway;
      const apply = async () => {
        // Governance applies without a restart (turning it on or off still needs one).
        const g = governance && next.gateway.governance.profile !== "off" ? await governance.reload(next.gateway.governance) : undefined;
        // Curation and virtual servers belong to the governance block: a policy that does not load keeps the whole block in force.
        if (g?.applied !== false) curation?.reload(next.gateway.governance);
        rateLimits?.reload(next.gateway.rateLimits);
        return g;
      };
      const { result: g, notified } = toolViews ? await toolViews.around(apply) : { result: await apply(), notified: 0 };
      const offStill = !governance && wasOff && next.gateway.governance.profile === "off";
      settingsChanged = settingsChanged.filter((k) => (k !== "governance" || !(g || offStill)) && (k !== "rateLimits" || !rateLimits));
      return { ...report, settingsChanged, ...(g ? { governance: g } : {}), listChanged: notified };
    });
    reloading = run.catch(() => undefined);
    return run;
  };
}

export async function reloadServers(
  registry: ServerRegistry,
  sessions: SessionManager,
  desired: Readonly<Record<string, ServerConfig>>,
): Promise<ReloadReport> {
  const report: ReloadReport = { added: [], removed: [], updated: [], unchanged: [], skipped: [] };
  const attempt = async (server: string, work: () => Promise<unknown>, done: string[]) => {
    try {
      await work();
      done.push(server);
    } catch (err) {
      report.skipped.push({ server, reason: toToolErrorText(err) });
    }
  };
  for (const entry of registry.list()) {
    if (entry.addedBy !== "config" || Object.hasOwn(desired, entry.name)) continue;
    await attempt(entry.name, () => sessions.removeServer(undefined, entry.name), report.removed);
  }
  for (const [name, config] of Object.entries(desired)) {
    const existing = registry.get(name);
    if (!existing) {
      await attempt(name, () => sessions.addConfigServer(name, config), report.added);
    } else if (existing.addedBy !== "config") {
      report.skipped.push({ server: name, reason: "a server of that name was added at runtime (add_server); remove_server it, then reload again" });
    } else if (sameServerConfig(existing.config, config)) {
      report.unchanged.push(name);
    } else {
      await attempt(
        name,
        async () => {
          await sessions.removeServer(undefined, name);
          await sessions.addConfigServer(name, config);
        },
        report.updated,
      );
    }
  }
  return report;
}

/** The top-level `gateway` keys whose values differ (`tools`, `port`, …); values are not returned (the token is one). */
export function changedSettings(before: GatewaySettings, after: GatewaySettings): string[] {
  const keys = new Set([...Object.keys(before), ...Object.keys(after)]) as Set<keyof GatewaySettings>;
  return [...keys].filter((k) => JSON.stringify(before[k]) !== JSON.stringify(after[k]));
}
