/**
 * The tools a transparent face shows one caller, and the upstream tool a
 * called name stands for (docs/adr/0024): governance visibility, then
 * curation (renames, overrides, fixed and default arguments), then the face's
 * naming — verbatim, `<server><sep><name>` on /all/mcp, or a virtual server's
 * chosen tools under their names there. Lists and calls use the same mapping,
 * so a listed name is always callable and a renamed tool's upstream name is not.
 */
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import type { Principal } from "../../auth/principal.js";
import { ErrorCodes, GatewayError } from "../../errors.js";
import type { GatewayContext } from "../../session/gateway-context.js";
import type { Catalog } from "./catalog.js";

export interface FaceTool {
  server: string;
  /** The upstream's own name of the tool. */
  upstream: string;
  /** The tool as this caller sees it on this face (name included). */
  tool: Tool;
}

export interface CuratedFace {
  catalog: Catalog;
  gateway: Pick<GatewayContext, "curation" | "governance">;
}

const virtualOf = (catalog: Catalog) => (catalog.target.kind === "virtual" ? catalog.target.name : undefined);

/** The tools of `rows` (upstream tools by server) this caller sees on the face, in the face's order. */
export function faceTools(face: CuratedFace, principal: Principal | undefined, rows: ReadonlyArray<{ server: string; item: Tool }>): FaceTool[] {
  const { catalog, gateway } = face;
  const vs = virtualOf(catalog);
  const shown = (server: string, tool: string) => gateway.governance?.visible(principal, server, tool, vs) ?? true;
  const view = (server: string, tool: Tool) => gateway.curation?.view(principal, server, tool) ?? tool;
  let out: FaceTool[];
  if (vs !== undefined) {
    const byKey = new Map(rows.map((r) => [JSON.stringify([r.server, r.item.name]), r.item]));
    out = (gateway.curation?.virtualTools(principal, vs) ?? []).flatMap((ref) => {
      const item = byKey.get(JSON.stringify([ref.server, ref.tool]));
      if (!item || !shown(ref.server, ref.tool)) return [];
      return [{ server: ref.server, upstream: ref.tool, tool: { ...view(ref.server, item), name: ref.exposed } }];
    });
  } else {
    out = rows.flatMap((r) => {
      if (!shown(r.server, r.item.name)) return [];
      const curated = view(r.server, r.item);
      return [{ server: r.server, upstream: r.item.name, tool: { ...curated, name: catalog.expose(r.server, curated.name) } }];
    });
  }
  const to = out.map((t) => tryResolve(face, principal, t.tool.name));
  // A tool whose shown name calls another tool of its server (a rename onto an upstream name) is shadowed by it: not listed.
  const kept = out.filter((t, i) => !(to[i]?.server === t.server && to[i]?.tool !== t.upstream));
  // Two upstreams exposing one name on /all/mcp is an error (as without curation).
  if (catalog.target.kind === "all")
    catalog.assertUnique(
      kept.map((t) => ({ exposed: t.tool.name, server: t.server })),
      "tool",
    );
  return kept.filter((t) => {
    const target = to[out.indexOf(t)];
    return target?.server === t.server && target.tool === t.upstream;
  });
}

/** The upstream server and tool `exposed` calls for this caller; EMCP_UNKNOWN_TOOL when it names none. */
export function resolveTool(face: CuratedFace, principal: Principal | undefined, exposed: string): { server: string; tool: string } {
  const found = tryResolve(face, principal, exposed, true);
  if (found) return found;
  const vs = virtualOf(face.catalog);
  throw new GatewayError(
    ErrorCodes.UNKNOWN_TOOL,
    vs !== undefined
      ? `virtual server '${vs}' has no tool '${exposed}'; list its tools with tools/list`
      : `unknown tool '${exposed}'; list the tools with tools/list`,
    { details: { tool: exposed } },
  );
}

function tryResolve(face: CuratedFace, principal: Principal | undefined, exposed: string, loud = false): { server: string; tool: string } | undefined {
  const { catalog, gateway } = face;
  const vs = virtualOf(catalog);
  if (vs !== undefined) {
    const ref = gateway.curation?.virtualTools(principal, vs).find((r) => r.exposed === exposed);
    return ref && catalog.servers().includes(ref.server) ? { server: ref.server, tool: ref.tool } : undefined;
  }
  let split: { server: string; name: string };
  try {
    split = catalog.resolve(exposed, "tool");
  } catch (err) {
    // The catalog's own message (which prefixes exist) is the better one for a caller.
    if (loud) throw err;
    return undefined;
  }
  const tool = gateway.curation ? gateway.curation.upstreamName(principal, split.server, split.name) : split.name;
  return tool === undefined ? undefined : { server: split.server, tool };
}
