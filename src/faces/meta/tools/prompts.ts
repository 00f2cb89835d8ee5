/** list_prompts, get_prompt. */
import { z } from "zod";
import { principalOf } from "../../../auth/principal.js";
import { assertPromptVisible, visiblePrompts } from "../../../governance/visibility.js";
import { defineTool, json, payload } from "../define.js";
import { fanout, named } from "./fanout.js";

export const listPrompts = defineTool({
  name: "list_prompts",
  title: "List prompts",
  description: "List the prompts of one server, or of every server when `server` is omitted.",
  input: { server: z.string().optional().describe("Server name; omit for all") },
  annotations: { readOnlyHint: true },
  async run(ctx, { server }, extra) {
    // Hidden prompts (gateway.governance.visibility) are absent.
    const viewer = { governance: ctx.gateway.governance, principal: principalOf(extra.authInfo) };
    return json({ servers: named("prompts", await fanout(ctx, server, async (c) => visiblePrompts(viewer, c.name, await c.listPrompts()))) });
  },
});

export const getPrompt = defineTool({
  name: "get_prompt",
  title: "Get a prompt",
  description: "Get a prompt from a server, with its arguments filled in.",
  input: {
    server: z.string().describe("Server name"),
    name: z.string().describe("Prompt name, as in list_prompts"),
    arguments: z.record(z.string(), z.string()).optional().describe("Prompt arguments (string values)"),
  },
  annotations: { readOnlyHint: true },
  async run({ session, gateway }, { server, name, arguments: args }, extra) {
    assertPromptVisible({ governance: gateway.governance, principal: principalOf(extra.authInfo) }, server, name);
    const conn = await session.connection(server);
    // The upstream's GetPromptResult as it came (no structuredContent: it is not the gateway's to shape).
    return payload(await conn.getPrompt(name, args));
  },
});
