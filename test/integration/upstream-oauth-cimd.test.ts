/**
 * The gateway's Client ID Metadata Document (SEP-991; src/upstream/auth/setup.ts):
 * served without a token at <https public URL>/oauth/client-metadata.json,
 * its client_id its own URL and its redirect URI the upstream callback; not
 * served without an https public URL. In-process gateways.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { startInProcessGateway } from "../helpers/in-process.js";

const vault = () => ({ keys: randomBytes(32).toString("base64") });

describe("Client ID Metadata Document", () => {
  test("served at the https public URL's /oauth/client-metadata.json: a public client whose client_id is that URL", async () => {
    const gw = await startInProcessGateway({ gateway: { http: { publicUrl: "https://gw.example" }, vault: vault() } });
    try {
      const res = await fetch(`${gw.url.replace(/\/mcp$/, "")}/oauth/client-metadata.json`);
      assert.equal(res.status, 200);
      const doc = (await res.json()) as Record<string, unknown>;
      assert.equal(doc["client_id"], "https://gw.example/oauth/client-metadata.json");
      assert.deepEqual(doc["redirect_uris"], ["https://gw.example/console/oauth/callback"]);
      assert.equal(doc["token_endpoint_auth_method"], "none");
    } finally {
      await gw.close();
    }
  });

  test("not served without an https public URL (SEP-991 needs an https client_id)", async () => {
    const gw = await startInProcessGateway({ gateway: { vault: vault() } });
    try {
      const res = await fetch(`${gw.url.replace(/\/mcp$/, "")}/oauth/client-metadata.json`);
      assert.notEqual(res.status, 200);
      await res.body?.cancel();
    } finally {
      await gw.close();
    }
  });
});
