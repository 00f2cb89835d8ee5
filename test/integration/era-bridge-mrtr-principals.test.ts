/**
 * MRTR states are the principal's (issue 25, ADR 0032 "MRTR bridges"): the
 * requestState alice (an OAuth user of a real OpenID provider) gets for a
 * parked call (bridge 3, server-everything in process) or for a modern
 * upstream's round (bridge 1, the reference server over HTTP) is refused
 * when the static token's operator presents it for the same call, and still
 * serves alice afterwards.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { startModernReferenceServer, type ModernReferenceServer } from "../fixtures/modern-reference-server.js";
import { inProcess, startInProcessGateway } from "../helpers/in-process.js";
import type { TestGateway } from "../helpers/gateway.js";
import { MemoryOAuthClient, loginAndConnect } from "../helpers/oauth-client.js";
import { startOidcProvider, type TestOidcProvider } from "../helpers/oidc.js";
import { modernRequest } from "../helpers/modern-requests.js";

const SCOPE = "mcp:tools";
const STATIC_TOKEN = "static-operator-token-0123456789";
const REDIRECT = "http://127.0.0.1:65500/callback";
const CAPS = { elicitation: { form: {} } };

describe("MRTR states are the principal's", { timeout: 300_000 }, () => {
  let idp: TestOidcProvider;
  let upstream: ModernReferenceServer;
  let gw: TestGateway;
  let alice: Client;
  const aliceLogin = new MemoryOAuthClient(REDIRECT);
  const as = (token: string) => ({ capabilities: CAPS, headers: { authorization: `Bearer ${token}` } });
  // One face for both upstreams: alice's token is bound to the face she logged in on.
  const all = () => `${new URL(gw.url).origin}/all/mcp`;

  before(async () => {
    idp = await startOidcProvider({ scopes: [SCOPE] });
    upstream = await startModernReferenceServer();
    gw = await startInProcessGateway({
      mcpServers: { everything: inProcess("everything"), modern: { url: upstream.url } },
      gateway: { token: STATIC_TOKEN, auth: { oauth: { issuers: [idp.issuer], scopes: [SCOPE] } } },
    });
    alice = (await loginAndConnect(all(), "alice", aliceLogin)).client;
  });

  after(async () => {
    await (alice?.transport as StreamableHTTPClientTransport | undefined)?.terminateSession().catch(() => undefined);
    await alice?.close().catch(() => undefined);
    await gw?.close();
    await upstream?.close();
    await idp?.close();
  });

  for (const [bridge, call, answer] of [
    ["bridge 3 (parked)", { name: "everything__trigger-elicitation-request", arguments: {} }, { action: "accept", content: { name: "Alice" } }],
    ["bridge 1 (relayed)", { name: "modern__test_input_required_result_request_state", arguments: {} }, { action: "accept", content: { ok: true } }],
  ] as const) {
    it(`${bridge}: the operator cannot use alice's requestState; alice can`, async () => {
      const face = all();
      const aliceToken = aliceLogin.saved!.access_token;
      const asked = await modernRequest(face, "tools/call", call, as(aliceToken));
      assert.equal(asked.body.result?.resultType, "input_required", JSON.stringify(asked.body));
      const key = Object.keys(asked.body.result.inputRequests as object)[0]!;
      const retry = { ...call, inputResponses: { [key]: answer }, requestState: asked.body.result.requestState };
      const stolen = await modernRequest(face, "tools/call", retry, as(STATIC_TOKEN));
      assert.equal(stolen.body.error?.code, -32602, JSON.stringify(stolen.body));
      assert.equal(stolen.body.error?.data?.code, "EMCP_BAD_REQUEST_STATE");
      assert.match(stolen.body.error.message, /another call/);
      const hers = await modernRequest(face, "tools/call", retry, as(aliceToken));
      assert.equal(hers.body.result?.resultType, "complete", JSON.stringify(hers.body));
    });
  }
});
