/**
 * Pinned tool definitions (issue 24, docs/adr/0029), in process: the
 * rug-pull fixture changes `weather`'s description after its first call.
 * `hide`: the changed tool is absent from every list and unknown when called
 * (meta and transparent faces), until an admin accepts the new definition;
 * then it is back, as changed. `approve`: it stays listed, and a call is
 * refused as needing an approval that names the pin. Both with the pins in
 * the store, one row per tool.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { eventually } from "../helpers/async-extra.js";
import { block, call, connectClient } from "../helpers/gateway.js";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";
import { PULLED, resetRugPull } from "../fixtures/rug-pull-server.js";

const servers = { rug: inProcess("rug-pull") };

const text = (r: unknown) => ((r as CallToolResult).content ?? []).map((c) => ("text" in c ? c.text : "")).join(" ");

async function refusal(p: Promise<unknown>): Promise<string> {
  const r = (await p.then(
    (v) => v,
    (e: unknown) => ({ thrown: e as Error }),
  )) as CallToolResult & { thrown?: Error };
  if (r.thrown) return r.thrown.message;
  assert.equal(r.isError, true, `expected a refusal, got ${JSON.stringify(r).slice(0, 300)}`);
  return text(r);
}

const names = async (c: Client) => (await c.listTools()).tools.map((t) => t.name).sort();
const metaNames = async (c: Client) =>
  ((block<Array<{ tools?: Array<{ name: string }> }>>(await call(c, "list_tools", { server: "rug" }), "servers") ?? [])[0]?.tools ?? [])
    .map((t) => t.name)
    .sort();

test("hide: a changed definition is absent and unknown on every face until accepted; then it is back as changed", { timeout: 120_000 }, async () => {
  resetRugPull();
  const gw = await startInProcessGateway({ mcpServers: servers, gateway: { governance: { profile: "enforce", pins: { mode: "hide" } } } });
  const base = gw.url.replace(/\/mcp$/, "");
  const single = await connectClient(`${base}/servers/rug/mcp`);
  const meta = await connectClient(gw.url);
  try {
    assert.deepEqual(await names(single), ["clock", "weather"]);
    const store = gw.gateway.context.store;
    assert.equal((await store.pins.list()).length, 2, "both tools pinned when first seen");
    assert.equal(text(await single.callTool({ name: "weather", arguments: { city: "Oslo" } })), "sunny in Oslo");
    // The upstream changed the description (and said so): the tool is gone for every caller.
    await eventually("weather gone from the list", async () => ((await names(single)).join() === "clock" ? true : undefined));
    assert.deepEqual(await metaNames(meta), ["clock"]);
    assert.match(await refusal(single.callTool({ name: "weather", arguments: { city: "Oslo" } })), /unknown tool|no tool 'weather'/);
    assert.match(await refusal(call(meta, "execute_tool", { server: "rug", tool: "weather", args: { city: "Oslo" } })), /EMCP_UNKNOWN_TOOL|no tool 'weather'/);
    const [quarantined] = await store.pins.list({ quarantined: true });
    assert.equal(quarantined?.tool, "weather");
    assert.equal(quarantined?.pending?.definition.description, PULLED);
    // An admin accepts the new definition (the console's Pins page does this): it is back, as changed.
    const accepted = await gw.gateway.context.governance!.pins.accept("rug", "weather", quarantined.pending.digest, "alice");
    assert.equal(accepted?.pinned.by, "alice");
    assert.deepEqual(await names(single), ["clock", "weather"]);
    assert.equal((await single.listTools()).tools.find((t) => t.name === "weather")?.description, PULLED);
    assert.equal(text(await single.callTool({ name: "weather", arguments: { city: "Bergen" } })), "sunny in Bergen");
  } finally {
    await single.close();
    await meta.close();
    await gw.close();
  }
});

test("approve: a changed definition stays listed and each call is refused as needing an approval that names the pin", { timeout: 120_000 }, async () => {
  resetRugPull();
  const gw = await startInProcessGateway({
    mcpServers: servers,
    gateway: { governance: { profile: "enforce", pins: { mode: "approve" }, approvals: { holdMs: 0 } } },
  });
  const base = gw.url.replace(/\/mcp$/, "");
  const single = await connectClient(`${base}/servers/rug/mcp`);
  try {
    assert.deepEqual(await names(single), ["clock", "weather"], "first seen (and pinned) as listed");
    assert.equal(text(await single.callTool({ name: "weather", arguments: { city: "Oslo" } })), "sunny in Oslo");
    await eventually("the changed description listed", async () =>
      (await single.listTools()).tools.find((t) => t.name === "weather")?.description === PULLED ? true : undefined,
    );
    assert.match(await refusal(single.callTool({ name: "weather", arguments: { city: "Oslo" } })), /approv/i);
    const decisions = await gw.gateway.context.store.decisions.list();
    const asked = decisions.find((d) => d.tool === "weather" && d.outcome === "approval_required");
    assert.equal(asked?.ruleId, "pin:rug/weather", "the decision names the pin");
    assert.equal(text(await single.callTool({ name: "clock", arguments: {} })), "noon", "an unchanged tool is not touched");
  } finally {
    await single.close();
    await gw.close();
  }
});
