/**
 * The console's Pins and Audit pages (issue 24, docs/adr/0029) in a real
 * Chromium, on an in-process gateway with the rug-pull fixture and pins in
 * `hide`: the quarantined tool shows with a diff of its pinned and new
 * description, Accept (a plain form) pins the new one and the agent sees the
 * tool again; the Audit page lists the decisions, filtered by tool and
 * outcome, the acceptance with who did it.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { BrowserContext, Page } from "playwright-core";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { browserUnavailable, openTestPage, type TestBrowser } from "../helpers/browser.js";
import { eventually } from "../helpers/async-extra.js";
import { connectClient, type TestGateway } from "../helpers/gateway.js";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";
import { HONEST, PULLED, resetRugPull } from "../fixtures/rug-pull-server.js";

const skip = browserUnavailable();

describe("pins and audit pages in a real browser", { skip, timeout: 300_000 }, () => {
  let gw: TestGateway;
  let base: string;
  let tb: TestBrowser;
  let context: BrowserContext;
  let page: Page;
  let agent: Client;
  const names = async () =>
    (await agent.listTools()).tools
      .map((t) => t.name)
      .sort()
      .join();

  before(async () => {
    resetRugPull();
    gw = await startInProcessGateway({
      mcpServers: { rug: inProcess("rug-pull") },
      gateway: { governance: { profile: "enforce", pins: { mode: "hide" }, rules: [{ id: "no-clock", server: "rug", tool: "clock", action: "deny" }] } },
    });
    base = gw.url.replace(/\/mcp$/, "");
    agent = await connectClient(`${base}/servers/rug/mcp`);
    ({ tb, context, page } = await openTestPage());
  });

  after(async () => {
    await agent?.close().catch(() => undefined);
    await context?.close();
    await tb?.close();
    await gw?.close();
  });

  test("a quarantined tool shows its diff; Accept pins the new definition and the agent sees the tool again", async () => {
    assert.equal(await names(), "clock,weather");
    await agent.callTool({ name: "weather", arguments: { city: "Oslo" } });
    await eventually("weather quarantined", async () => ((await names()) === "clock" ? true : undefined));
    await page.goto(`${base}/console/pins`);
    const card = page.locator("article.pin");
    await card.waitFor();
    const diff = (await card.locator("pre.diff").textContent()) ?? "";
    const lines = diff.split("\n").map((l) => l.replace(/\s+/g, " ").trim());
    assert.ok(lines.includes(`- "description": "${HONEST}",`), `the pinned line, in ${diff}`);
    assert.ok(lines.includes(`+ "description": "${PULLED}",`), `the new line, in ${diff}`);
    assert.ok(lines.includes(`"type": "object"`), "an unchanged line is not marked");
    await card.getByRole("button", { name: "Accept the new definition" }).click();
    await page.waitForURL(/accepted=/);
    assert.match((await page.getByRole("status").textContent()) ?? "", /Accepted the new definition of weather on rug/);
    assert.equal(await page.locator("article.pin").count(), 0, "nothing quarantined any more");
    assert.equal(await names(), "clock,weather");
    assert.equal((await agent.listTools()).tools.find((t) => t.name === "weather")?.description, PULLED);
    // The form again (a second admin, a stale page): 409, nothing changes.
    const again = await page.request.post(`${base}/console/pins/accept`, {
      form: { server: "rug", tool: "weather", digest: "0".repeat(64) },
      headers: { Origin: base },
    });
    assert.equal(again.status(), 409);
  });

  test("the audit page lists decisions newest first, filtered by tool and outcome, with the acceptance and who made it", async () => {
    await agent.callTool({ name: "clock", arguments: {} }).catch(() => undefined);
    await page.goto(`${base}/console/audit`);
    const rows = page.locator("#audit tbody tr");
    await rows.first().waitFor();
    const all = await rows.allTextContents();
    assert.ok(all.length >= 3, `calls and the acceptance listed: ${all.join(" | ")}`);
    assert.match(all[0]!, /clock/, "newest first");
    await page.getByLabel("Tool").fill("weather");
    await page.getByRole("button", { name: "Filter" }).click();
    await page.waitForURL(/tool=weather/);
    const weather = await rows.allTextContents();
    assert.ok(weather.length >= 2 && weather.every((t) => t.includes("weather")), weather.join(" | "));
    assert.ok(
      weather.some((t) => /pin:rug\/weather/.test(t) && /operator: accepted the new tool definition/.test(t)),
      "the acceptance is a decision record naming the pin and who",
    );
    await page.goto(`${base}/console/audit?outcome=deny`);
    const denied = await rows.allTextContents();
    assert.equal(denied.length, 1);
    assert.match(denied[0]!, /clock/);
    assert.match(denied[0]!, /no-clock/);
    const bad = await page.goto(`${base}/console/audit?from=yesterday`);
    assert.equal(bad?.status(), 400);
    assert.match((await page.getByRole("alert").first().textContent()) ?? "", /'from' is not a date and time/);
  });
});
