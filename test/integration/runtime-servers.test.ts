/**
 * Servers added at runtime (docs/adr/0015), in process over Streamable HTTP:
 * what an error quotes of a non-MCP endpoint, redirects, the URL rules
 * (gateway.servers.runtimeUrls), and one session's server against another
 * session — its credentials and its URL. The upstreams are local node:http
 * listeners: a real MCP server (the SDK's, stateless) that records the
 * Authorization header of every request, and plain endpoints that record
 * what reaches them.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { createLogger } from "../../src/logging.js";
import { createTransportFactory } from "../../src/upstream/transports.js";
import type { TransportFactory } from "../../src/upstream/transport-types.js";
import { call, connectClient, startGateway, type TestGateway } from "../helpers/gateway.js";
import { allText, errorCodeOf, eventually, field, payloadText } from "../helpers/async-extra.js";
import { freePort } from "../helpers/core-extra.js";
import { redisSkipReason, startRedis } from "../helpers/redis.js";
import { statelessEchoHandler } from "../helpers/echo-upstream.js";

const SLOW = { timeout: 120_000 };
const MARKER = "SECRET-PAST-THE-EXCERPT-7f3a";

interface Recorded {
  method: string;
  path: string;
  authorization: string | undefined;
}

interface Endpoint {
  base: string;
  requests: Recorded[];
  close(): Promise<void>;
}

/** A node:http listener on 127.0.0.1 that records every request, then lets `handle` answer it. */
async function listen(handle: (req: IncomingMessage, res: ServerResponse) => void): Promise<Endpoint> {
  const requests: Recorded[] = [];
  const server: Server = createServer((req, res) => {
    requests.push({ method: req.method ?? "", path: req.url ?? "", authorization: req.headers.authorization });
    handle(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    base: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A real MCP server (stateless Streamable HTTP, the SDK's) with `echo`, recording its requests. */
function mcpUpstream(): Promise<Endpoint> {
  return listen(statelessEchoHandler("recording-upstream", "echo: "));
}

function ok(result: CallToolResult): CallToolResult {
  assert.notEqual(result.isError, true, `unexpected isError result: ${allText(result)}`);
  return result;
}

function refused(result: CallToolResult, code: string): string {
  assert.equal(result.isError, true, `expected ${code}, got ${allText(result)}`);
  assert.equal(errorCodeOf(result), code, payloadText(result));
  return payloadText(result);
}

async function echo(client: Client, server: string, message: string): Promise<string> {
  const result = ok(await call(client, "execute_tool", { server, tool: "echo", args: { message } }));
  return payloadText(result);
}

function sessionIdOf(client: Client): string {
  return (client.transport as StreamableHTTPClientTransport).sessionId!;
}

describe("what a failed add_server quotes, and redirects", () => {
  let gw: TestGateway;
  let client!: Client;
  let web!: Endpoint;
  let logs = "";

  before(async () => {
    // A 5 KB error page: a short start, then the marker well past any excerpt.
    const page = `<html><body>Not an MCP endpoint. ${"x".repeat(1000)} ${MARKER} ${"y".repeat(4000)}</body></html>`;
    web = await listen((req, res) => {
      if (req.url === "/big") res.writeHead(400, { "Content-Type": "text/html" }).end(page);
      else if (req.url === "/json") res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify({ page }));
      else if (req.url === "/moved") res.writeHead(307, { Location: "/final?token=abc" }).end();
      else if (req.url === "/elsewhere") res.writeHead(302, { Location: "http://127.0.0.1:9/other" }).end();
      else res.writeHead(404).end("not here");
    });
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logs += chunk.toString("utf8");
        done();
      },
    });
    gw = await startGateway({ mcpServers: {} }, { logger: createLogger("trace", sink) });
    client = await connectClient(gw.url);
  });
  after(async () => {
    await client?.close().catch(() => undefined);
    await gw?.close();
    await web?.close();
  });

  test("a non-MCP endpoint's 5 KB error body is quoted as a short single-line excerpt, never whole", SLOW, async () => {
    const text = refused(await call(client, "add_server", { name: "page", url: `${web.base}/big` }), "EMCP_UPSTREAM_UNAVAILABLE");
    assert.ok(
      web.requests.some((r) => r.path === "/big"),
      "the endpoint was asked",
    );
    assert.match(text, /Not an MCP endpoint\. x+… \(truncated\)/);
    assert.ok(!text.includes(MARKER), `the error quotes past the excerpt: ${text}`);
    assert.ok(!text.includes("yyyy"));
    assert.ok(text.length < 1000, `the error is ${text.length} characters long`);
    // The whole reply (events included) and every log line, at trace level, say no more.
    const servers = await call(client, "list_servers");
    assert.ok(!allText(servers).includes(MARKER));
    assert.ok(!logs.includes(MARKER), "a log line carries the body past the excerpt");
    assert.deepEqual(gw.gateway.context.registry.names(), []);
  });

  test("a JSON answer that is not JSON-RPC gives a bounded one-line error, without the body", SLOW, async () => {
    const text = refused(await call(client, "add_server", { name: "json", url: `${web.base}/json` }), "EMCP_UPSTREAM_UNAVAILABLE");
    assert.ok(!text.includes(MARKER));
    assert.ok(!text.includes("\n"), text);
    assert.ok(text.length < 1000, `the error is ${text.length} characters long`);
  });

  test("a redirect is not followed: the error names where it pointed and the target is never asked", SLOW, async () => {
    const text = refused(await call(client, "add_server", { name: "moved", url: `${web.base}/moved` }), "EMCP_UPSTREAM_UNAVAILABLE");
    assert.match(text, /HTTP 307/);
    assert.ok(text.includes(`${web.base}/final`), text);
    assert.ok(!text.includes("token=abc"), "the Location's query is left out");
    assert.match(text, /redirects are not followed for servers added at runtime/);
    assert.match(text, /with the final URL/);
    assert.ok(!web.requests.some((r) => r.path.startsWith("/final")), "the redirect was followed");

    const other = refused(await call(client, "add_server", { name: "elsewhere", url: `${web.base}/elsewhere` }), "EMCP_UPSTREAM_UNAVAILABLE");
    assert.match(other, /HTTP 302, a redirect to http:\/\/127\.0\.0\.1:9\/other/);
    assert.deepEqual(gw.gateway.context.registry.names(), []);
  });
});

describe("gateway.servers.runtimeUrls", () => {
  let upstream!: Endpoint;
  before(async () => {
    upstream = await mcpUpstream();
  });
  after(() => upstream?.close());

  test("by default a link-local or cloud metadata URL is EMCP_FORBIDDEN before any transport is made; loopback works", SLOW, async (t) => {
    const made: string[] = [];
    const real = createTransportFactory({ killGraceMs: 1000 });
    const recording: TransportFactory = (name, config, options) => {
      made.push(name);
      return real(name, config, options);
    };
    const gw = await startGateway({ mcpServers: {} }, { transportFactory: recording });
    t.after(() => gw.close());
    const client = await connectClient(gw.url);
    t.after(() => client.close());

    for (const url of [
      "http://169.254.169.254/latest/meta-data/",
      "http://[fe80::1]/mcp",
      "http://metadata.google.internal/computeMetadata/v1/",
      "http://2852039166/",
    ]) {
      const text = refused(await call(client, "add_server", { name: "meta", url }), "EMCP_FORBIDDEN");
      assert.match(text, /gateway\.servers\.runtimeUrls/, text);
      assert.match(text, /deny/);
    }
    assert.deepEqual(made, [], "a transport was made for a denied URL");

    ok(await call(client, "add_server", { name: "local", url: `${upstream.base}/mcp` }));
    assert.equal(await echo(client, "local", "hi"), "echo: hi");
    assert.deepEqual(made, ["local"]);
  });

  test("deny by resolved address: `localhost` is refused when its addresses are denied, and nothing reaches it", SLOW, async (t) => {
    const gw = await startGateway({ mcpServers: {}, gateway: { servers: { runtimeUrls: { deny: ["127.0.0.0/8", "::1"] } } } });
    t.after(() => gw.close());
    const client = await connectClient(gw.url);
    t.after(() => client.close());
    const before = upstream.requests.length;
    const port = new URL(upstream.base).port;
    for (const url of [`${upstream.base}/mcp`, `http://localhost:${port}/mcp`]) {
      const text = refused(await call(client, "add_server", { name: "local", url }), "EMCP_FORBIDDEN");
      assert.match(text, /matches '(127\.0\.0\.0\/8|::1)' in gateway\.servers\.runtimeUrls\.deny/, text);
    }
    assert.equal(upstream.requests.length, before, "a denied URL was connected to");
  });

  test("an allow list: only URLs under an allowed prefix or host may be added", SLOW, async (t) => {
    const allowed = `${upstream.base}/mcp`;
    const gw = await startGateway({ mcpServers: {}, gateway: { servers: { runtimeUrls: { allow: [allowed] } } } });
    t.after(() => gw.close());
    const client = await connectClient(gw.url);
    t.after(() => client.close());
    const before = upstream.requests.length;
    const port = new URL(upstream.base).port;
    const text = refused(await call(client, "add_server", { name: "other", url: `http://localhost:${port}/mcp` }), "EMCP_FORBIDDEN");
    assert.match(text, /matches no pattern of gateway\.servers\.runtimeUrls\.allow/);
    refused(await call(client, "add_server", { name: "other", url: `${upstream.base}/other` }), "EMCP_FORBIDDEN");
    assert.equal(upstream.requests.length, before);
    ok(await call(client, "add_server", { name: "allowed", url: allowed }));
    assert.equal(await echo(client, "allowed", "in"), "echo: in");
  });

  test("a bad pattern fails the config, naming the key", async () => {
    await assert.rejects(
      startGateway({ mcpServers: {}, gateway: { servers: { runtimeUrls: { deny: ["10.0.0.0/99"] } } } }),
      /runtimeUrls[\s\S]*not a valid CIDR range/,
    );
  });
});

for (const sharing of ["session", "shared"] as const) {
  describe(`one session's runtime server, seen from another (remote upstreams ${sharing})`, () => {
    let gw: TestGateway;
    let upstream!: Endpoint;
    let evil!: Endpoint;
    let a!: Client;
    let b!: Client;

    before(async () => {
      upstream = await mcpUpstream();
      evil = await mcpUpstream();
      gw = await startGateway({ mcpServers: {}, gateway: { upstream: { sharing: { stdio: "session", remote: sharing } } } });
      a = await connectClient(gw.url, { name: "session-a" });
      b = await connectClient(gw.url, { name: "session-b" });
      ok(await call(a, "add_server", { name: "keyed", url: `${upstream.base}/mcp`, headers: { Authorization: "Bearer A-SECRET" } }));
    });
    after(async () => {
      await a?.close().catch(() => undefined);
      await b?.close().catch(() => undefined);
      await gw?.close();
      await upstream?.close();
      await evil?.close();
    });

    test("the adding session's calls carry its headers; another session sees the server and uses it without them", SLOW, async () => {
      const start = upstream.requests.length;
      assert.equal(await echo(a, "keyed", "from a"), "echo: from a");
      const ofA = upstream.requests.slice(start).filter((r) => r.method === "POST");
      assert.ok(ofA.length > 0 && ofA.every((r) => r.authorization === "Bearer A-SECRET"), JSON.stringify(ofA));

      const fromB = upstream.requests.length;
      assert.equal(await echo(b, "keyed", "from b"), "echo: from b");
      const ofB = upstream.requests.slice(fromB);
      assert.ok(ofB.length > 0, "B's call reached the upstream");
      assert.ok(
        ofB.every((r) => r.authorization === undefined),
        `B's requests carry a header: ${JSON.stringify(ofB)}`,
      );
      const rows = field<Array<{ name: string; owner: string; sharing: string }>>(await call(b, "list_servers"), "servers") ?? [];
      const row = rows.find((s) => s.name === "keyed");
      assert.equal(row?.owner, "another_session");
      assert.equal(row?.sharing, "session", "a server with credentials is never shared");
      const mine = field<Array<{ name: string; owner: string }>>(await call(a, "list_servers"), "servers")?.find((s) => s.name === "keyed");
      assert.equal(mine?.owner, "this_session");
      // add_server of the same URL without headers just connects B (no change, nothing refused).
      assert.equal(field(ok(await call(b, "add_server", { name: "keyed", url: `${upstream.base}/mcp` })), "outcome"), "unchanged");
    });

    test("another session cannot re-point, re-key or remove it (EMCP_FORBIDDEN naming the setting); the owner's calls go on as before", SLOW, async () => {
      for (const args of [
        { name: "keyed", url: `${evil.base}/mcp` },
        { name: "keyed", url: `${evil.base}/mcp`, headers: { Authorization: "Bearer A-SECRET" } },
        { name: "keyed", url: `${upstream.base}/mcp`, headers: { Authorization: "Bearer B-KEY" } },
      ]) {
        const text = refused(await call(b, "add_server", args), "EMCP_FORBIDDEN");
        assert.match(text, /gateway\.servers\.allowCrossSessionChanges/);
        assert.match(text, /added at runtime by another session/);
      }
      const text = refused(await call(b, "remove_server", { name: "keyed" }), "EMCP_FORBIDDEN");
      assert.match(text, /gateway\.servers\.allowCrossSessionChanges/);
      assert.equal(evil.requests.length, 0, "the other URL was contacted");

      const start = upstream.requests.length;
      assert.equal(await echo(a, "keyed", "still mine"), "echo: still mine");
      const ofA = upstream.requests.slice(start).filter((r) => r.method === "POST");
      assert.ok(ofA.length > 0 && ofA.every((r) => r.authorization === "Bearer A-SECRET"));
      assert.equal(evil.requests.length, 0);
    });

    test("the owner may change and remove its own server; once it has ended, others may remove what it left", SLOW, async () => {
      const updated = ok(await call(a, "add_server", { name: "keyed", url: `${upstream.base}/mcp`, headers: { Authorization: "Bearer A-NEW" } }));
      assert.equal(field(updated, "outcome"), "updated");
      ok(await call(a, "add_server", { name: "left", url: `${upstream.base}/mcp`, headers: { Authorization: "Bearer A-SECRET" } }));
      ok(await call(a, "remove_server", { name: "keyed" }));
      refused(await call(b, "remove_server", { name: "left" }), "EMCP_FORBIDDEN");
      await (a.transport as StreamableHTTPClientTransport).terminateSession();
      const gone = sessionIdOf(a);
      await a.close();
      assert.equal(gw.gateway.context.sessions.get(gone), undefined);
      assert.equal(field(ok(await call(b, "remove_server", { name: "left" })), "removed"), "left");
      assert.deepEqual(gw.gateway.context.registry.names(), []);
    });
  });
}

describe("gateway.servers.allowCrossSessionChanges: true", () => {
  test("another session may re-point a runtime server; the new config is its own (the first session's headers are gone)", SLOW, async (t) => {
    const first = await mcpUpstream();
    const second = await mcpUpstream();
    t.after(() => first.close());
    t.after(() => second.close());
    const gw = await startGateway({ mcpServers: {}, gateway: { servers: { allowCrossSessionChanges: true } } });
    t.after(() => gw.close());
    const a = await connectClient(gw.url);
    const b = await connectClient(gw.url);
    t.after(() => a.close());
    t.after(() => b.close());
    ok(await call(a, "add_server", { name: "keyed", url: `${first.base}/mcp`, headers: { Authorization: "Bearer A-SECRET" } }));
    assert.equal(field(ok(await call(b, "add_server", { name: "keyed", url: `${second.base}/mcp` })), "outcome"), "updated");
    assert.equal(await echo(a, "keyed", "after"), "echo: after");
    assert.ok(second.requests.length > 0);
    assert.ok(second.requests.every((r) => r.authorization === undefined));
    ok(await call(a, "remove_server", { name: "keyed" }));
  });
});

describe("two replicas on one Redis (server-sync, docs/adr/0013)", { skip: redisSkipReason() }, () => {
  test("a session on another replica sees the server without its headers and cannot re-point or remove it", SLOW, async (t) => {
    const redis = await startRedis();
    t.after(() => redis.stop());
    const upstream = await mcpUpstream();
    const evil = await mcpUpstream();
    t.after(() => upstream.close());
    t.after(() => evil.close());
    const replica = async (): Promise<TestGateway> => {
      const port = await freePort();
      const cluster = { enabled: true, advertiseUrl: `http://127.0.0.1:${port}`, secret: "runtime-servers-cluster-secret-01" };
      const gw = await startGateway({ mcpServers: {}, gateway: { port, store: { kind: "redis", url: redis.url }, cluster } });
      t.after(() => gw.close());
      return gw;
    };
    const [one, two] = [await replica(), await replica()];
    const a = await connectClient(one.url, { name: "session-a" });
    const b = await connectClient(two.url, { name: "session-b" });
    t.after(() => a.close());
    t.after(() => b.close());
    ok(await call(a, "add_server", { name: "keyed", url: `${upstream.base}/mcp`, headers: { Authorization: "Bearer A-SECRET" } }));
    // Replica two applies the change from pub/sub; B's first successful call goes out without A's header.
    const start = upstream.requests.length;
    await eventually("the server on the other replica", async () => {
      const result = await call(b, "execute_tool", { server: "keyed", tool: "echo", args: { message: "b" } });
      return result.isError ? undefined : result;
    });
    const ofB = upstream.requests.slice(start);
    assert.ok(ofB.length > 0 && ofB.every((r) => r.authorization === undefined), JSON.stringify(ofB));
    const text = refused(await call(b, "add_server", { name: "keyed", url: `${evil.base}/mcp` }), "EMCP_FORBIDDEN");
    assert.match(text, /gateway\.servers\.allowCrossSessionChanges/);
    refused(await call(b, "remove_server", { name: "keyed" }), "EMCP_FORBIDDEN");
    assert.equal(evil.requests.length, 0);
    const fromA = upstream.requests.length;
    assert.equal(await echo(a, "keyed", "a"), "echo: a");
    assert.ok(upstream.requests.slice(fromA).every((r) => r.authorization === "Bearer A-SECRET"));
  });
});
