/**
 * Token passthrough (issue 23, docs/adr/0027 §14): a remote upstream gets the caller's own inbound bearer token
 * only when the operator wrote `auth: { type: "passthrough" }` for it; a warning naming the server (never the
 * token) is logged at start; combined with OAuth fields or per-user secrets the config is refused.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { IncomingMessage } from "node:http";
import { attachPrincipal, inboundTokenOf, makePrincipal, refreshInboundToken } from "../../src/auth/principal.js";
import { parseConfig } from "../../src/config/load.js";
import { createLogger } from "../../src/logging.js";
import { call, startGateway, type TestGateway } from "../helpers/gateway.js";
import { startHeaderEchoServer, type HeaderEchoServer } from "../fixtures/header-echo-server.js";

const TOKEN = "passthrough-test-token-0123456789abcdef";

describe("token passthrough", { timeout: 120_000 }, () => {
  let upstream: HeaderEchoServer;
  let gw: TestGateway;
  let client: Client;
  const logText: string[] = [];

  before(async () => {
    upstream = await startHeaderEchoServer();
    gw = await startGateway(
      {
        mcpServers: { fwd: { url: upstream.url, auth: { type: "passthrough" } }, plain: { url: upstream.url } },
        gateway: { token: TOKEN },
      },
      { logger: createLogger("debug", new Writable({ write: (chunk: Buffer, _e, done) => (logText.push(chunk.toString("utf8")), done()) })) },
    );
    client = new Client({ name: "passthrough-test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(gw.url), { requestInit: { headers: { authorization: `Bearer ${TOKEN}` } } }));
  });

  after(async () => {
    await client?.close().catch(() => undefined);
    await gw?.close();
    await upstream?.close();
  });

  const whoheader = async (server: string) => {
    const r = await call(client, "execute_tool", { server, tool: "whoheader", args: {} });
    assert.ok(!r.isError, JSON.stringify(r.content));
    return (r.content as Array<{ text?: string }>).map((c) => c.text ?? "").join("\n");
  };

  test("the opted-in upstream sees the caller's token; the other does not", async () => {
    assert.match(await whoheader("fwd"), new RegExp(`Bearer ${TOKEN}`));
    const plain = await whoheader("plain");
    assert.doesNotMatch(plain, new RegExp(TOKEN));
    assert.match(plain, /none/);
  });

  test("a warning names the passthrough server at start, and no log line holds the token", () => {
    const lines = logText.join("").split("\n").filter(Boolean);
    const warned = lines.filter((l) => /auth: passthrough/.test(l));
    assert.equal(warned.length, 1, lines.join("\n").slice(0, 2000));
    assert.match(warned[0]!, /"server":"fwd"/);
    assert.match(warned[0]!, /"level":40/);
    assert.ok(!lines.some((l) => l.includes(TOKEN)), "no log line carries the token");
  });

  test("refused with a config error when combined with OAuth or with per-user secrets", () => {
    assert.throws(
      () => parseConfig({ mcpServers: { x: { url: "http://127.0.0.1:1/mcp", auth: { type: "passthrough", clientId: "c" } } } }),
      /passthrough forwards the caller's own token and cannot be combined with OAuth/,
    );
    assert.throws(
      () =>
        parseConfig({
          mcpServers: { x: { url: "http://127.0.0.1:1/mcp", auth: { type: "passthrough" }, secrets: { key: { header: "X-Api-Key" } } } },
        }),
      /cannot be combined with per-user secrets/,
    );
  });

  test("without authentication the passthrough server's calls fail with EMCP_UPSTREAM_AUTH_FAILED, naming the fix", async () => {
    const open = await startGateway({ mcpServers: { fwd: { url: upstream.url, auth: { type: "passthrough" } } } });
    const anon = new Client({ name: "passthrough-anon", version: "1.0.0" });
    try {
      await anon.connect(new StreamableHTTPClientTransport(new URL(open.url)));
      const r = await call(anon, "execute_tool", { server: "fwd", tool: "whoheader", args: {} });
      assert.equal(r.isError, true);
      assert.match(JSON.stringify(r.content), /EMCP_UPSTREAM_AUTH_FAILED[\s\S]*turn on the gateway's authentication/);
    } finally {
      await anon.close().catch(() => undefined);
      await open.close();
    }
  });

  test("a session's principal takes the newest token of the same person only", () => {
    const person = { issuer: "https://idp", subject: "alice", scopes: [], claims: {} };
    const first = makePrincipal(person);
    const later = makePrincipal(person);
    const other = makePrincipal({ ...person, subject: "bob" });
    const req = () => ({ headers: {} }) as IncomingMessage;
    attachPrincipal(req(), first, "token-1");
    attachPrincipal(req(), later, "token-2");
    attachPrincipal(req(), other, "token-bob");
    refreshInboundToken(first, other);
    assert.equal(inboundTokenOf(first), "token-1");
    refreshInboundToken(first, later);
    assert.equal(inboundTokenOf(first), "token-2");
    assert.equal(JSON.stringify(first).includes("token"), false, "the token is not in the principal object");
  });
});
