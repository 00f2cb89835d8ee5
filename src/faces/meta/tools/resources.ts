/** list_resources, list_resource_templates, read_resource. */
import { z } from "zod";
import { principalOf } from "../../../auth/principal.js";
import { ErrorCodes, GatewayError } from "../../../errors.js";
import { assertResourceVisible, visibleResources, visibleTemplates } from "../../../governance/visibility.js";
import { DIAGRAMS_URI, diagramsContents } from "../diagrams.js";
import { defineTool, json, payload } from "../define.js";
import { fanout, named } from "./fanout.js";

const GATEWAY = "emceepee";
const gatewayResources = [
  {
    uri: DIAGRAMS_URI,
    name: "diagrams",
    title: "Gateway state diagrams",
    mimeType: "application/json",
    description: "Mermaid diagrams of emceepee's task, elicitation and sampling state machines",
  },
];

export const listResources = defineTool({
  name: "list_resources",
  title: "List resources",
  description: `List the resources of one server, or of every server plus the gateway's own ('${GATEWAY}') when \`server\` is omitted.`,
  input: { server: z.string().optional().describe("Server name; omit for all") },
  annotations: { readOnlyHint: true },
  async run(ctx, { server }, extra) {
    if (server === GATEWAY) return json({ servers: [{ server: GATEWAY, resources: gatewayResources }] });
    // Hidden resources (gateway.governance.visibility) are absent.
    const viewer = { governance: ctx.gateway.governance, principal: principalOf(extra.authInfo) };
    const rows = named("resources", await fanout(ctx, server, async (c) => visibleResources(viewer, c.name, await c.listResources())));
    return json({ servers: server === undefined ? [{ server: GATEWAY, resources: gatewayResources }, ...rows] : rows });
  },
});

export const listResourceTemplates = defineTool({
  name: "list_resource_templates",
  title: "List resource templates",
  description: "List the resource templates of one server, or of every server when `server` is omitted.",
  input: { server: z.string().optional().describe("Server name; omit for all") },
  annotations: { readOnlyHint: true },
  async run(ctx, { server }, extra) {
    const viewer = { governance: ctx.gateway.governance, principal: principalOf(extra.authInfo) };
    return json({
      servers: named("resourceTemplates", await fanout(ctx, server, async (c) => visibleTemplates(viewer, c.name, await c.listResourceTemplates()))),
    });
  },
});

export const readResource = defineTool({
  name: "read_resource",
  title: "Read a resource",
  description: `Read a resource by URI from a server. \`server\` may be omitted for the gateway's own ${DIAGRAMS_URI}.`,
  input: {
    server: z.string().optional().describe("Server name (omit for emceepee:// resources)"),
    uri: z.string().min(1).describe("Resource URI, as in list_resources"),
  },
  annotations: { readOnlyHint: true },
  async run({ session, gateway }, { server, uri }, extra) {
    if ((server === undefined || server === GATEWAY) && uri.startsWith("emceepee://")) {
      if (uri !== DIAGRAMS_URI) throw new GatewayError(ErrorCodes.BAD_ARGUMENTS, `unknown gateway resource '${uri}'; the gateway has ${DIAGRAMS_URI}`);
      return payload(diagramsContents());
    }
    if (server === undefined) {
      throw new GatewayError(ErrorCodes.BAD_ARGUMENTS, "`server` is required for upstream resources; call list_resources to find the owner of a URI");
    }
    // A hidden resource is refused as an unknown one, before the upstream is asked.
    assertResourceVisible({ governance: gateway.governance, principal: principalOf(extra.authInfo) }, server, uri);
    const conn = await session.connection(server);
    // The upstream's contents as they came, once (blobs are not repeated in structuredContent).
    return payload(await conn.readResource(uri));
  },
});
