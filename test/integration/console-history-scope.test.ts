/**
 * Console history is scoped by person (issue 22's rule, issue 28's pages):
 * people log into the console with OpenID Connect at a real test provider
 * (oidc-provider), agents call tools as themselves on /mcp, and each person's
 * Activity, Upstreams statistics and ended-task history show only their own
 * principal's records; an admin sees everyone's and may filter by principal.
 * Plain HTTP reads (the pages need no JavaScript). server-everything runs in
 * process (test/helpers/in-process.ts).
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { principalHash } from "../../src/auth/principal.js";
import { sessionHash } from "../../src/logging.js";
import { eventually } from "../helpers/async-extra.js";
import { call, type TestGateway } from "../helpers/gateway.js";
import { startInProcessGateway } from "../helpers/in-process.js";
import { MemoryOAuthClient, loginAndConnect } from "../helpers/oauth-client.js";
import { consoleLogin, startOidcProvider, type TestOidcProvider } from "../helpers/oidc.js";
import { freePort } from "../helpers/core-extra.js";

const SCOPE = "mcp:tools";
const MCP_REDIRECT = "http://127.0.0.1:65503/callback";
const CONSOLE_SECRET = "console-client-secret-history-0123456789";

describe("console history per person", { timeout: 600_000 }, () => {
  let idp: TestOidcProvider;
  let gw: TestGateway;
  let base: string;
  const clients: Client[] = [];
  const refs: Record<string, string> = {};
  const cookies: Record<string, string> = {};

  const consoleCookie = (user: string): Promise<string> => consoleLogin(base, user, idp.issuer);

  const read = async (user: string, path: string): Promise<string> => {
    const res = await fetch(`${base}${path}`, { headers: { cookie: cookies[user]! } });
    assert.equal(res.status, 200, path);
    return res.text();
  };

  before(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    idp = await startOidcProvider({
      scopes: [SCOPE],
      accountClaims: (id) => ({ roles: id === "root" ? ["ops"] : [] }),
      clients: [
        {
          client_id: "mcp-client",
          redirect_uris: [MCP_REDIRECT],
          token_endpoint_auth_method: "none",
          grant_types: ["authorization_code"],
          response_types: ["code"],
        },
        {
          client_id: "console",
          client_secret: CONSOLE_SECRET,
          redirect_uris: [`${base}/console/callback`],
          token_endpoint_auth_method: "client_secret_post",
          grant_types: ["authorization_code"],
          response_types: ["code"],
        },
      ],
    });
    gw = await startInProcessGateway({
      gateway: {
        port,
        activity: { flushMs: 20 },
        auth: { oauth: { issuers: [idp.issuer], scopes: [SCOPE] } },
        console: { oidc: { clientId: "console", clientSecret: CONSOLE_SECRET, scopes: ["openid", "roles"], roles: { admin: ["ops"] } } },
      },
    });
    for (const user of ["alice", "bob"]) {
      const { client, sessionId } = await loginAndConnect(`${base}/mcp`, user, new MemoryOAuthClient(MCP_REDIRECT));
      clients.push(client);
      refs[user] = sessionHash(sessionId);
      const r = await call(client, "execute_tool", { server: "everything", tool: "echo", args: { message: `from ${user}` } });
      assert.notEqual(r.isError, true);
    }
    for (const user of ["alice", "bob", "root"]) cookies[user] = await consoleCookie(user);
    await eventually("both calls recorded", async () =>
      (await gw.gateway.context.store.activity.list({ kind: "tool_call", limit: 10 })).length >= 2 ? true : undefined,
    );
  });

  after(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await gw?.close();
    await idp?.close();
  });

  test("Activity: a person sees their own principal's records only (a principal filter is ignored); an admin sees all and filters by principal", async () => {
    const alice = await read("alice", `/console/activity?kind=tool_call&principal=${principalHash(idp.issuer, "bob")}`);
    assert.ok(alice.includes(refs.alice!), "alice sees her call");
    assert.ok(!alice.includes(refs.bob!), "alice does not see bob's session");
    assert.ok(!alice.includes('id="filter-principal"'), "no principal filter for a non-admin");
    const root = await read("root", "/console/activity?kind=tool_call");
    assert.ok(root.includes(refs.alice!) && root.includes(refs.bob!), "the admin sees both");
    const onlyBob = await read("root", `/console/activity?kind=tool_call&principal=${principalHash(idp.issuer, "bob")}`);
    assert.ok(onlyBob.includes(refs.bob!) && !onlyBob.includes(refs.alice!), "the admin's principal filter");
  });

  test("Upstreams statistics and ended sessions' tasks count the asker's own records only", async () => {
    const calls = (page: string) => Number(/data-label="Calls">(\d+)</.exec(page)?.[1] ?? "0");
    assert.equal(calls(await read("alice", "/console/upstreams")), 1, "alice's one echo");
    assert.equal(calls(await read("root", "/console/upstreams")), 2, "everyone's two");
    // A task record of bob's (as the session observer writes them) is not in alice's history nor on its page for her.
    gw.gateway.context.activity!.record({
      kind: "task",
      outcome: "completed",
      server: "everything",
      tool: "echo",
      taskId: "bobs-ended-task",
      sessionHash: refs.bob!,
      principalHash: principalHash(idp.issuer, "bob"),
    });
    await gw.gateway.context.activity!.flush();
    assert.ok((await read("root", "/console/tasks")).includes("bobs-ended-task"), "the admin sees it among ended sessions' tasks");
    assert.ok(!(await read("alice", "/console/tasks")).includes("bobs-ended-task"));
    const page = await fetch(`${base}/console/tasks/bobs-ended-task`, { headers: { cookie: cookies.alice! } });
    assert.equal(page.status, 404, "alice cannot open bob's ended task");
    assert.equal((await fetch(`${base}/console/tasks/bobs-ended-task`, { headers: { cookie: cookies.bob! } })).status, 200, "bob can");
  });
});
