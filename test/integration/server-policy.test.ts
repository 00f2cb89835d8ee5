/**
 * The runtime server policy (docs/adr/0006) end to end, over Streamable HTTP
 * against server-everything (its own code in process, test/helpers/in-process.ts;
 * the remote one the SDK's stateless server with an `echo` tool, on a node:http
 * listener in this process): what add_server / remove_server may do
 * by default, with `gateway.servers.*` opted in, and on a gateway bound beyond
 * loopback with and without a token. And session ids kept out of the logs:
 * the gateway's own logger (createLogger) writing to a captured stream.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Writable } from "node:stream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { createLogger, sessionHash } from "../../src/logging.js";
import { call, connectClient, type TestGateway } from "../helpers/gateway.js";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";
import { statelessEchoHandler } from "../helpers/echo-upstream.js";
import { firstText, listServers, pollFor } from "../helpers/core-extra.js";
import { errorCodeOf, field, payloadText } from "../helpers/async-extra.js";

const SLOW = { timeout: 120_000 };
const TOKEN = "policy-test-token-0123456789";

function ok(result: CallToolResult): CallToolResult {
  assert.notEqual(result.isError, true, `unexpected isError result: ${JSON.stringify(result.content)}`);
  return result;
}

/** The EMCP_FORBIDDEN text of a refused call. */
function forbidden(result: CallToolResult): string {
  assert.equal(result.isError, true, `expected a refusal, got ${JSON.stringify(result.content)}`);
  assert.equal(errorCodeOf(result), "EMCP_FORBIDDEN", payloadText(result));
  return payloadText(result);
}

async function echo(client: Client, server: string, message: string): Promise<void> {
  const result = ok(await call(client, "execute_tool", { server, tool: "echo", args: { message } }));
  assert.equal(firstText(result), `Echo: ${message}`);
}

/** A stdio "server" that only leaves a file behind: if the file exists, the gateway ran it. */
function markerCommand(marker: string) {
  return { command: "/bin/sh", args: ["-c", ': > "$1"', "marker", marker] };
}

async function connectWithToken(url: string, token: string): Promise<Client> {
  const client = new Client({ name: "token-client", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return client;
}

/** The gateway listens on 0.0.0.0; clients reach it on 127.0.0.1 (a loopback Host the guards accept). */
const viaLoopback = (url: string) => url.replace("//0.0.0.0:", "//127.0.0.1:");

/** The remote (`url`) server, in this process: the policy is the subject, not the upstream's process (ADR 0059). */
async function remoteEchoUpstream(): Promise<{ url: string; close(): Promise<void> }> {
  const listener = createServer(statelessEchoHandler("remote-echo", "Echo: "));
  await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
  const { port } = listener.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    close: () =>
      new Promise<void>((resolve) => {
        listener.closeAllConnections();
        listener.close(() => resolve());
      }),
  };
}

let http: { url: string; close(): Promise<void> } | undefined;
const marker = path.join(os.tmpdir(), `emceepee-policy-${process.pid}-${Date.now()}`);

before(async () => {
  http = await remoteEchoUpstream();
});
after(async () => {
  await http?.close();
  fs.rmSync(marker, { force: true });
});

describe("defaults: remote servers at runtime, stdio and config-file servers from the config file only", () => {
  let gw: TestGateway;
  let client!: Client;

  before(async () => {
    gw = await startInProcessGateway();
    client = await connectClient(gw.url);
  });
  after(async () => {
    await client?.close().catch(() => undefined);
    await gw?.close();
  });

  test("add_server with `command` is EMCP_FORBIDDEN, says how to opt in and why, and runs nothing", SLOW, async () => {
    const text = forbidden(await call(client, "add_server", { name: "local", ...markerCommand(marker) }));
    assert.match(text, /gateway\.servers\.allowRuntimeStdio/);
    assert.match(text, /run a program on the gateway's host/);
    assert.match(text, /config file/);
    assert.equal(fs.existsSync(marker), false, "the refused command must not have run");
    assert.deepEqual(gw.gateway.context.registry.names(), ["everything"]);
    assert.ok(!(await listServers(client)).some((s) => s.name === "local"));
  });

  test("add_server with the config-file server's own stdio config just connects (nothing new runs)", SLOW, async () => {
    assert.equal(field(ok(await call(client, "add_server", { name: "everything", ...inProcess("everything") })), "outcome"), "unchanged");
  });

  test("a remote (`url`) server can be added, used and removed at runtime", SLOW, async () => {
    const added = ok(await call(client, "add_server", { name: "remote", url: http!.url }));
    assert.equal(field(added, "outcome"), "added");
    const row = (await listServers(client)).find((s) => s.name === "remote") as { source?: string } | undefined;
    assert.equal(row?.source, "runtime");
    await echo(client, "remote", "over http");
    assert.equal(field(ok(await call(client, "remove_server", { name: "remote" })), "removed"), "remote");
    assert.deepEqual(gw.gateway.context.registry.names(), ["everything"]);
  });

  test("remove_server of a config-file server is EMCP_FORBIDDEN and leaves it in place", SLOW, async () => {
    const text = forbidden(await call(client, "remove_server", { name: "everything" }));
    assert.match(text, /'everything' comes from the gateway's config file/);
    assert.match(text, /gateway\.servers\.allowConfigServerChanges/);
    await echo(client, "everything", "still here");
  });

  test("add_server replacing a config-file server with another config is EMCP_FORBIDDEN", SLOW, async () => {
    const text = forbidden(await call(client, "add_server", { name: "everything", url: http!.url }));
    assert.match(text, /gateway\.servers\.allowConfigServerChanges/);
    assert.match(text, /under another name/);
    assert.equal((await listServers(client)).find((s) => s.name === "everything")?.transport, "stdio");
  });
});

describe("opted in, on loopback", () => {
  let gw: TestGateway;
  let client!: Client;

  before(async () => {
    gw = await startInProcessGateway({ gateway: { servers: { allowRuntimeStdio: true, allowConfigServerChanges: true } } });
    client = await connectClient(gw.url);
  });
  after(async () => {
    await client?.close().catch(() => undefined);
    await gw?.close();
  });

  test("allowRuntimeStdio: add_server with `command` starts it; it can be used and removed", SLOW, async () => {
    const added = ok(await call(client, "add_server", { name: "second", ...inProcess("everything") }));
    assert.equal(field(added, "outcome"), "added");
    await echo(client, "second", "runtime stdio");
    ok(await call(client, "remove_server", { name: "second" }));
    assert.deepEqual(gw.gateway.context.registry.names(), ["everything"]);
  });

  test("allowConfigServerChanges: a config-file server can be replaced (it stays a config-file server) and removed", SLOW, async () => {
    assert.equal(field(ok(await call(client, "add_server", { name: "everything", url: http!.url })), "outcome"), "updated");
    const row = (await listServers(client)).find((s) => s.name === "everything") as { source?: string; transport?: string } | undefined;
    assert.equal(row?.transport, "streamable-http");
    assert.equal(row?.source, "config", "a reload or restart brings the file's config back");
    await echo(client, "everything", "replaced");
    ok(await call(client, "remove_server", { name: "everything" }));
    assert.deepEqual(gw.gateway.context.registry.names(), []);
  });
});

describe("bound beyond loopback (0.0.0.0)", () => {
  const optedIn = { allowRuntimeStdio: true, allowRuntimeRemote: true, allowConfigServerChanges: true };

  test("without a token every runtime change is refused, whatever gateway.servers says; the gateway still serves", SLOW, async (t) => {
    const gw = await startInProcessGateway({ gateway: { host: "0.0.0.0", servers: optedIn } });
    t.after(() => gw.close());
    const client = await connectClient(viaLoopback(gw.url));
    t.after(() => client.close());

    const stdio = forbidden(await call(client, "add_server", { name: "local", ...markerCommand(marker) }));
    assert.match(stdio, /0\.0\.0\.0, beyond loopback, without a token/);
    assert.match(stdio, /run any command on its host/);
    assert.match(stdio, /gateway\.token/);
    assert.match(stdio, /gateway\.auth\.oauth\.issuers/, "OAuth satisfies the check too: the message names it");
    assert.equal(fs.existsSync(marker), false, "the refused command must not have run");

    assert.match(forbidden(await call(client, "add_server", { name: "remote", url: http!.url })), /connect to any URL/);
    assert.match(forbidden(await call(client, "remove_server", { name: "everything" })), /without a token/);
    assert.match(forbidden(await call(client, "add_server", { name: "everything", url: http!.url })), /without a token/);

    assert.deepEqual(gw.gateway.context.registry.names(), ["everything"]);
    await echo(client, "everything", "served on 127.0.0.1");
  });

  test("with a token, the opted-in changes are allowed again", SLOW, async (t) => {
    const gw = await startInProcessGateway({ gateway: { host: "0.0.0.0", token: TOKEN, servers: optedIn } });
    t.after(() => gw.close());
    const client = await connectWithToken(viaLoopback(gw.url), TOKEN);
    t.after(() => client.close());

    ok(await call(client, "add_server", { name: "second", ...inProcess("everything") }));
    await echo(client, "second", "token holder");
    ok(await call(client, "remove_server", { name: "second" }));
    ok(await call(client, "remove_server", { name: "everything" }));
    assert.deepEqual(gw.gateway.context.registry.names(), []);
  });
});

describe("session ids in logs", () => {
  test("the gateway's log names sessions by sessionHash only, never by id; tokens stay redacted", SLOW, async (t) => {
    let log = "";
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        log += chunk.toString("utf8");
        done();
      },
    });
    const logLines = () =>
      log
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    const gw = await startInProcessGateway({ gateway: { token: TOKEN } }, { logger: createLogger("trace", sink) });
    t.after(() => gw.close());

    // A meta session that adds, updates and is refused (server_config_updated, server_change_forbidden, meta_tool_error).
    const meta = await connectWithToken(gw.url, TOKEN);
    const metaId = (meta.transport as StreamableHTTPClientTransport).sessionId!;
    ok(await call(meta, "add_server", { name: "remote", url: http!.url }));
    ok(await call(meta, "add_server", { name: "remote", url: http!.url, headers: { "X-Test": "1" } }));
    forbidden(await call(meta, "remove_server", { name: "everything" }));
    assert.equal((await call(meta, "execute_tool", { server: "nope", tool: "echo" })).isError, true);

    // A transparent session, and a meta client attached to it with ?session=<its id>.
    const transparent = await connectWithToken(gw.url.replace(/\/mcp$/, "/servers/everything/mcp"), TOKEN);
    const transparentId = (transparent.transport as StreamableHTTPClientTransport).sessionId!;
    const attached = await connectWithToken(`${gw.url}?session=${encodeURIComponent(transparentId)}`, TOKEN);
    ok(await call(attached, "list_servers"));
    await attached.close();
    await (transparent.transport as StreamableHTTPClientTransport).terminateSession();
    await transparent.close();
    await (meta.transport as StreamableHTTPClientTransport).terminateSession();
    await meta.close();
    // DELETE ends a session in the background: wait for both to be logged as destroyed.
    const destroyed = (id: string) => logLines().some((l) => l.msg === "session_destroyed" && l.sessionHash === sessionHash(id));
    await pollFor(async () => (destroyed(metaId) && destroyed(transparentId) ? true : undefined), "session_destroyed of both sessions");
    await gw.close();

    const lines = logLines();
    for (const id of [metaId, transparentId]) {
      assert.ok(id.length >= 32, `a real session id: ${id}`);
      assert.ok(!log.includes(id), `the session id ${id} appears in the log`);
      const hash = sessionHash(id);
      assert.match(hash, /^[0-9a-f]{8}$/);
      const mine = lines.filter((l) => l.sessionHash === hash).map((l) => l.msg);
      assert.ok(mine.includes("session_created") && mine.includes("session_destroyed"), `${hash}: ${JSON.stringify(mine)}`);
    }
    const metaLines = lines.filter((l) => l.sessionHash === sessionHash(metaId)).map((l) => l.msg);
    assert.ok(metaLines.includes("server_change_forbidden"), JSON.stringify(metaLines));
    assert.ok(metaLines.includes("meta_tool_error"), JSON.stringify(metaLines));
    const updated = lines.find((l) => l.msg === "server_config_updated");
    assert.equal(updated?.bySessionHash, sessionHash(metaId));
    assert.ok(!lines.some((l) => "session" in l), "no log line has a `session` field");
    assert.ok(!log.includes(TOKEN), "the token is never logged");

    // The redaction itself: a token and upstream headers given to the logger come out censored.
    let redacted = "";
    const probe = createLogger(
      "info",
      new Writable({
        write(chunk: Buffer, _encoding, done) {
          redacted += chunk.toString("utf8");
          done();
        },
      }),
    );
    probe.info({ token: TOKEN, config: { headers: { Authorization: `Bearer ${TOKEN}` } } }, "probe");
    assert.ok(!redacted.includes(TOKEN), redacted);
    assert.match(redacted, /\[redacted\]/);
  });
});
