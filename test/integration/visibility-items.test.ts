/**
 * Visibility of resources, resource templates and prompts (issue 24), in
 * process: one gateway with server-everything in process and visibility rules
 * hiding its blob resources (template and URIs) and one prompt. On the meta
 * face (list_resources, list_resource_templates, read_resource, list_prompts,
 * get_prompt, and run_code's mcp.readResource / mcp.getPrompt), the
 * single-server face and the /all face, a hidden one is absent from lists and
 * refused by name with the not-found error of one no upstream has; the visible
 * ones still work.
 */
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { call, connectClient, type TestGateway } from "../helpers/gateway.js";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";

const HIDDEN_URI = "demo://resource/dynamic/blob/1";
const SHOWN_URI = "demo://resource/dynamic/text/1";

let gw: TestGateway;
const clients: Client[] = [];

before(async () => {
  gw = await startInProcessGateway({
    mcpServers: { everything: inProcess("everything") },
    gateway: {
      codeMode: { enabled: true },
      governance: {
        profile: "enforce",
        visibility: [
          { id: "no-blobs", server: "everything", resource: "demo://resource/dynamic/blob/*", visible: false },
          { id: "no-args-prompt", server: "everything", prompt: "args-prompt", visible: false },
        ],
      },
    },
  });
});

after(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  await gw.close();
});

async function open(path: string): Promise<Client> {
  const c = await connectClient(gw.url.replace(/\/mcp$/, path));
  clients.push(c);
  return c;
}

const text = (r: CallToolResult) => r.content.map((c) => ("text" in c ? c.text : "")).join(" ");
const failure = (p: Promise<unknown>) =>
  p.then(
    (r) => JSON.stringify(r),
    (e: unknown) => String(e),
  );

test("meta face: hidden resources, templates and prompts are absent and unknown; run_code too", async () => {
  const meta = await open("/mcp");
  const resources = JSON.stringify((await call(meta, "list_resources", { server: "everything" })).structuredContent);
  assert.ok(!resources.includes("/dynamic/blob/"), resources.slice(0, 400));
  const templates = JSON.stringify((await call(meta, "list_resource_templates", {})).structuredContent);
  assert.ok(templates.includes("demo://resource/dynamic/text/{"), templates.slice(0, 400));
  assert.ok(!templates.includes("demo://resource/dynamic/blob/"), templates.slice(0, 400));
  const prompts = JSON.stringify((await call(meta, "list_prompts", {})).structuredContent);
  assert.ok(prompts.includes("simple-prompt") && !prompts.includes("args-prompt"), prompts.slice(0, 400));

  assert.ok(!(await call(meta, "read_resource", { server: "everything", uri: SHOWN_URI })).isError);
  const read = await call(meta, "read_resource", { server: "everything", uri: HIDDEN_URI });
  assert.equal(read.isError, true);
  assert.match(text(read), /EMCP_UNKNOWN_RESOURCE/);
  const got = await call(meta, "get_prompt", { server: "everything", name: "args-prompt", arguments: { city: "Paris" } });
  assert.equal(got.isError, true);
  assert.match(text(got), /EMCP_UNKNOWN_PROMPT/);
  assert.ok(!(await call(meta, "get_prompt", { server: "everything", name: "simple-prompt" })).isError);

  const run = await call(meta, "run_code", {
    code: `const out = [];
      for (const f of [() => mcp.readResource("everything", ${JSON.stringify(HIDDEN_URI)}), () => mcp.getPrompt("everything", "args-prompt", { city: "Paris" })]) {
        try { await f(); out.push("read"); } catch (e) { out.push(String(e.code ?? e.message)); }
      }
      const shown = await mcp.readResource("everything", ${JSON.stringify(SHOWN_URI)});
      out.push(shown.contents.length > 0 ? "shown" : "empty");
      return out;`,
  });
  const reply = JSON.stringify(run.structuredContent);
  assert.match(reply, /EMCP_UNKNOWN_RESOURCE.*EMCP_UNKNOWN_PROMPT.*shown/s, reply.slice(0, 600));
});

test("transparent faces (one server, /all): hidden ones are absent and refused like a missing one", async () => {
  const one = await open("/servers/everything/mcp");
  const listed = (await one.listResources()).resources.map((r) => r.uri);
  assert.ok(!listed.some((u) => u.includes("/dynamic/blob/")), listed.join(", "));
  const templates = (await one.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
  assert.ok(templates.some((t) => t.includes("/dynamic/text/")) && !templates.some((t) => t.includes("/dynamic/blob/")), templates.join(", "));
  const prompts = (await one.listPrompts()).prompts.map((p) => p.name);
  assert.ok(prompts.includes("simple-prompt") && !prompts.includes("args-prompt"), prompts.join(", "));
  assert.ok((await one.readResource({ uri: SHOWN_URI })).contents.length > 0);
  assert.match(await failure(one.readResource({ uri: HIDDEN_URI })), /EMCP_UNKNOWN_RESOURCE/);
  assert.match(await failure(one.getPrompt({ name: "args-prompt", arguments: { city: "Paris" } })), /EMCP_UNKNOWN_PROMPT/);

  const all = await open("/all/mcp");
  const allTemplates = (await all.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
  assert.ok(!allTemplates.some((t) => t.includes("/dynamic/blob/")), allTemplates.join(", "));
  const allPrompts = (await all.listPrompts()).prompts.map((p) => p.name);
  assert.ok(allPrompts.some((n) => n.endsWith("simple-prompt")) && !allPrompts.some((n) => n.endsWith("args-prompt")), allPrompts.join(", "));
  const hidden = await failure(all.readResource({ uri: HIDDEN_URI }));
  const missing = await failure(all.readResource({ uri: "nowhere://no/such/thing" }));
  assert.match(hidden, /EMCP_UNKNOWN_RESOURCE/);
  assert.equal(hidden.replace(HIDDEN_URI, "<uri>"), missing.replace("nowhere://no/such/thing", "<uri>"), "a hidden resource reads like a missing one");
  const hiddenPrompt = allPrompts.find((n) => n.endsWith("simple-prompt"))!.replace("simple-prompt", "args-prompt");
  assert.match(await failure(all.getPrompt({ name: hiddenPrompt, arguments: { city: "Paris" } })), /EMCP_UNKNOWN_PROMPT/);
  assert.ok((await all.readResource({ uri: SHOWN_URI })).contents.length > 0);
});
