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
import { startModernReferenceServer, type ModernReferenceServer } from "../fixtures/modern-reference-server.js";
import { inProcess } from "../helpers/in-process.js";
import { OPERATOR_TOKEN, startTwoPrincipals, type TwoPrincipals } from "../helpers/era-setups.js";
import { modernRequest } from "../helpers/modern-requests.js";

const CAPS = { elicitation: { form: {} } };

describe("MRTR states are the principal's", { timeout: 300_000 }, () => {
  let upstream: ModernReferenceServer;
  let principals: TwoPrincipals;
  const as = (token: string) => ({ capabilities: CAPS, headers: { authorization: `Bearer ${token}` } });

  before(async () => {
    upstream = await startModernReferenceServer();
    // One face for both upstreams: alice's token is bound to the face she logged in on.
    principals = await startTwoPrincipals((url) => `${new URL(url).origin}/all/mcp`, { everything: inProcess("everything"), modern: { url: upstream.url } });
  });
  after(async () => {
    await principals?.close();
    await upstream?.close();
  });
  const all = () => principals.face;

  for (const [bridge, call, answer] of [
    ["bridge 3 (parked)", { name: "everything__trigger-elicitation-request", arguments: {} }, { action: "accept", content: { name: "Alice" } }],
    ["bridge 1 (relayed)", { name: "modern__test_input_required_result_request_state", arguments: {} }, { action: "accept", content: { ok: true } }],
  ] as const) {
    it(`${bridge}: the operator cannot use alice's requestState; alice can`, async () => {
      const face = all();
      const aliceToken = principals.aliceToken();
      const asked = await modernRequest(face, "tools/call", call, as(aliceToken));
      assert.equal(asked.body.result?.resultType, "input_required", JSON.stringify(asked.body));
      const key = Object.keys(asked.body.result.inputRequests as object)[0]!;
      const retry = { ...call, inputResponses: { [key]: answer }, requestState: asked.body.result.requestState };
      const stolen = await modernRequest(face, "tools/call", retry, as(OPERATOR_TOKEN));
      assert.equal(stolen.body.error?.code, -32602, JSON.stringify(stolen.body));
      assert.equal(stolen.body.error?.data?.code, "EMCP_BAD_REQUEST_STATE");
      assert.match(stolen.body.error.message, /another call/);
      const hers = await modernRequest(face, "tools/call", retry, as(aliceToken));
      assert.equal(hers.body.result?.resultType, "complete", JSON.stringify(hers.body));
    });
  }
});
