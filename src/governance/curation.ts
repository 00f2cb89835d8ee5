/**
 * Curation of upstream tools per caller (docs/adr/0024-curation-and-virtual-servers.md):
 * renamed tools, other titles, descriptions and annotations, fixed and default
 * arguments, and the virtual servers' tool sets. Pure mapping between the
 * upstream's tool and what one caller sees; the first entry matching the
 * caller, server and tool applies — the caller's named profile's entries
 * first, then governance.curation (docs/adr/0024 §profiles). Reloaded whole
 * on SIGHUP (reload()).
 */
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import type { Principal } from "../auth/principal.js";
import type { CurationEntry, GovernanceSettings, VirtualServerSettings } from "../config/governance.js";
import { ErrorCodes, GatewayError } from "../errors.js";
import { principalMatches, profileFor } from "./match.js";

type Settings = Pick<GovernanceSettings, "curation" | "virtualServers"> & Partial<Pick<GovernanceSettings, "profiles" | "profileFor">>;

/** One tool of a virtual server as a caller sees it: the upstream's server and tool, and its name there. */
export interface VirtualToolRef {
  server: string;
  tool: string;
  exposed: string;
}

export class Curation {
  private settings: Settings;

  constructor(settings: Settings) {
    this.settings = settings;
  }

  /** Applies re-read settings (they were validated by the config schema). */
  reload(next: Settings): void {
    this.settings = next;
  }

  /** The entries this caller's view goes by: its named profile's (governance.profileFor), then the gateway's. */
  private entries(principal: Principal | undefined): readonly CurationEntry[] {
    const { profiles, profileFor: given } = this.settings;
    const own = profiles?.length && given?.length ? profileFor({ profiles, profileFor: given }, principal)?.curation : undefined;
    return own?.length ? [...own, ...this.settings.curation] : this.settings.curation;
  }

  /** The entry in force for this caller's view of `server`/`tool`, if any. */
  entryFor(principal: Principal | undefined, server: string, tool: string): CurationEntry | undefined {
    return this.entries(principal).find((c) => c.server === server && c.tool === tool && principalMatches(c.principal, principal));
  }

  /** The tool's name for this caller. */
  exposedName(principal: Principal | undefined, server: string, tool: string): string {
    return this.entryFor(principal, server, tool)?.name ?? tool;
  }

  /**
   * The upstream tool a caller's name stands for on `server`: a tool renamed
   * to it for this caller, else the name itself — unless that tool is renamed
   * for this caller (its upstream name is then unknown: undefined).
   */
  upstreamName(principal: Principal | undefined, server: string, exposed: string): string | undefined {
    for (const c of this.entries(principal)) {
      if (c.server !== server || c.name !== exposed || !principalMatches(c.principal, principal)) continue;
      // In force only if it is the caller's first entry for that tool.
      if (this.entryFor(principal, server, c.tool) === c) return c.tool;
    }
    const own = this.entryFor(principal, server, exposed);
    return own?.name !== undefined && own.name !== exposed ? undefined : exposed;
  }

  /**
   * The tool as this caller sees it: renamed, other title / description /
   * annotations, fixed arguments removed from its input schema, defaults shown
   * as the properties' `default` and no longer required.
   */
  view(principal: Principal | undefined, server: string, tool: Tool): Tool {
    const c = this.entryFor(principal, server, tool.name);
    if (!c) return tool;
    const fixed = Object.keys(c.arguments?.fixed ?? {});
    const defaults = c.arguments?.defaults ?? {};
    let inputSchema = tool.inputSchema;
    if (fixed.length || Object.keys(defaults).length) {
      const properties: Record<string, unknown> = { ...(inputSchema.properties ?? {}) };
      for (const k of fixed) delete properties[k];
      for (const [k, v] of Object.entries(defaults)) {
        const p = properties[k];
        properties[k] = { ...(p !== null && typeof p === "object" ? p : {}), default: v };
      }
      const required = (inputSchema.required ?? []).filter((k) => !fixed.includes(k) && !Object.hasOwn(defaults, k));
      const { required: _dropped, ...rest } = inputSchema;
      inputSchema = { ...rest, properties, ...(required.length ? { required } : {}) } as Tool["inputSchema"];
    }
    return {
      ...tool,
      name: c.name ?? tool.name,
      ...(c.title !== undefined ? { title: c.title } : {}),
      ...(c.description !== undefined ? { description: c.description } : {}),
      ...(c.annotations !== undefined ? { annotations: { ...tool.annotations, ...c.annotations } } : {}),
      inputSchema,
    };
  }

  /**
   * A server's tools as this caller sees them (view() of each), without the
   * tools shadowed by another renamed onto their name: what any listing of
   * one server's tools shows (meta list_tools, tool search).
   */
  viewAll(principal: Principal | undefined, server: string, tools: readonly Tool[]): Tool[] {
    return tools.flatMap((t) => {
      const shown = this.view(principal, server, t);
      return this.upstreamName(principal, server, shown.name) === t.name ? [shown] : [];
    });
  }

  /**
   * The arguments sent upstream for this caller's call: its own, defaults
   * filled where absent, fixed values set. Throws EMCP_BAD_ARGUMENTS when the
   * caller sends a fixed argument (it is not in the schema it was shown).
   */
  arguments(
    principal: Principal | undefined,
    server: string,
    tool: string,
    args: Record<string, unknown> | undefined,
    exposed = tool,
  ): Record<string, unknown> | undefined {
    const c = this.entryFor(principal, server, tool);
    if (!c?.arguments) return args;
    const fixed = c.arguments.fixed ?? {};
    const sent = Object.keys(args ?? {}).filter((k) => Object.hasOwn(fixed, k));
    if (sent.length) {
      throw new GatewayError(
        ErrorCodes.BAD_ARGUMENTS,
        `the gateway sets ${sent.map((k) => `'${k}'`).join(", ")} of '${exposed}' itself (curation); leave ${sent.length > 1 ? "them" : "it"} out of the arguments`,
        { details: { tool: exposed, fixed: sent } },
      );
    }
    const filled = { ...(c.arguments.defaults ?? {}), ...(args ?? {}), ...fixed };
    return Object.keys(filled).length || args !== undefined ? filled : undefined;
  }

  /** The virtual server of that name, or undefined. */
  virtualServer(name: string): VirtualServerSettings | undefined {
    return this.settings.virtualServers.find((v) => v.name === name);
  }

  virtualServerNames(): string[] {
    return this.settings.virtualServers.map((v) => v.name);
  }

  /** The tools a virtual server offers this caller, by the names it sees them (`as`, else its curated name), in config order. */
  virtualTools(principal: Principal | undefined, name: string): VirtualToolRef[] {
    return (this.virtualServer(name)?.tools ?? []).map((t) => ({
      server: t.server,
      tool: t.tool,
      exposed: t.as ?? this.exposedName(principal, t.server, t.tool),
    }));
  }
}
