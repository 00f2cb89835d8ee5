/**
 * gateway.auth and the resource-URL settings: values are validated with
 * messages that say what to write, and the externally visible URLs follow the
 * rules of src/auth/resource-url.ts (publicUrl, then trusted X-Forwarded-*,
 * then Host), PRM paths included.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import { externalBase, faceOfMetadataPath, metadataUrl, resourceUrl, type ResourceUrlOptions } from "../../src/auth/resource-url.js";
import { callersAuthenticated } from "../../src/auth/required.js";
import { exposureWarning } from "../../src/cli/banner.js";
import { gatewaySettingsSchema } from "../../src/config/schema.js";

function problems(gateway: unknown): string {
  const r = gatewaySettingsSchema.safeParse(gateway);
  assert.equal(r.success, false, "refused");
  return r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("\n");
}

describe("gateway.auth config", () => {
  test("OAuth is off by default and on with issuers", () => {
    assert.deepEqual(gatewaySettingsSchema.parse({}).auth.oauth.issuers, []);
    const on = gatewaySettingsSchema.parse({ auth: { oauth: { issuers: ["https://login.example.com"], scopes: ["mcp:tools"] } } });
    assert.deepEqual(on.auth.oauth.scopes, ["mcp:tools"]);
    assert.equal(on.auth.oauth.clockSkewMs, 30_000);
  });

  test("bad values are refused, naming the key and what to write", () => {
    assert.match(problems({ auth: { oauth: { issuers: ["login.example.com"] } } }), /auth\.oauth\.issuers\.0: must be an http:\/\/ or https:\/\/ URL/);
    assert.match(problems({ auth: { oauth: { issuers: ["https://x.example.com/?a=1"] } } }), /no query or fragment/);
    assert.match(problems({ auth: { oauth: { scopes: ["mcp:tools"] } } }), /auth\.oauth\.issuers: OAuth settings need issuers/);
    assert.match(problems({ auth: { oauth: { issuers: ["https://l.example.com"], scopes: ["two words"] } } }), /a scope is one token/);
    assert.match(problems({ auth: { oauth: { issuers: ["https://l.example.com"], clockSkewMs: 600_000 } } }), /auth\.oauth\.clockSkewMs/);
    assert.match(
      problems({ auth: { oauth: { issuers: ["https://l.example.com"], introspection: { endpoint: "https://l.example.com/introspect" } } } }),
      /introspection\.endpoint: introspection\.endpoint needs clientId and clientSecret/,
    );
    assert.match(problems({ auth: { oauth: { issuers: ["https://l.example.com"], issuer: "x" } } }), /issuer/);
    assert.match(problems({ http: { publicUrl: "mcp.example.com" } }), /http\.publicUrl: must be an http:\/\/ or https:\/\/ URL/);
  });
});

function req(headers: IncomingHttpHeaders): IncomingMessage {
  return { headers } as unknown as IncomingMessage;
}

describe("resource URLs", () => {
  const plain: ResourceUrlOptions = {
    trustForwardedHeaders: false,
    listenAddress: () => "127.0.0.1:8808",
    hostAllowed: (host) => ["mcp.example.com", "a.example.com"].includes(host),
  };
  const forwarded = { "x-forwarded-proto": "https", "x-forwarded-host": "mcp.example.com", host: "10.0.0.5:8808" };

  test("publicUrl wins, with its path prefix, and PRM URLs insert the well-known path before it", () => {
    const o: ResourceUrlOptions = { ...plain, publicUrl: "https://example.com/gw/" };
    assert.equal(externalBase(req(forwarded), o), "https://example.com/gw");
    assert.equal(resourceUrl(req({}), o, "/servers/a/mcp"), "https://example.com/gw/servers/a/mcp");
    assert.equal(metadataUrl(req({}), o, "/mcp"), "https://example.com/.well-known/oauth-protected-resource/gw/mcp");
    assert.equal(metadataUrl(req({}), o, ""), "https://example.com/.well-known/oauth-protected-resource/gw");
    assert.equal(faceOfMetadataPath("/.well-known/oauth-protected-resource/gw/mcp", o), "/mcp");
    assert.equal(faceOfMetadataPath("/.well-known/oauth-protected-resource/mcp", o), "/mcp", "a proxy may strip the prefix");
    assert.equal(faceOfMetadataPath("/.well-known/oauth-protected-resource/gw", o), "");
    assert.equal(faceOfMetadataPath("/.well-known/oauth-protected-resource", o), "");
    assert.equal(faceOfMetadataPath("/mcp", o), undefined);
  });

  test("X-Forwarded-* only when trusted, and only well-formed; else the Host header; else the listen address", () => {
    assert.equal(externalBase(req(forwarded), { ...plain, trustForwardedHeaders: true }), "https://mcp.example.com");
    assert.equal(externalBase(req(forwarded), plain), "http://10.0.0.5:8808", "not trusted: ignored");
    const bad = { ...forwarded, "x-forwarded-host": 'evil.com/"x' };
    assert.equal(externalBase(req(bad), { ...plain, trustForwardedHeaders: true }), "http://10.0.0.5:8808");
    assert.equal(
      externalBase(req({ "x-forwarded-proto": "https, http", "x-forwarded-host": "a.example.com, b" }), { ...plain, trustForwardedHeaders: true }),
      "https://a.example.com",
    );
    assert.equal(externalBase(req({ host: "LOCALHOST:8808" }), plain), "http://localhost:8808");
    assert.equal(externalBase(req({}), plain), "http://127.0.0.1:8808");
  });

  test("a header never names another resource: a forwarded host the Host guard refuses, or a Host on another port, is not used", () => {
    const trusted = { ...plain, trustForwardedHeaders: true };
    const other = { "x-forwarded-proto": "https", "x-forwarded-host": "other-resource.example.com", host: "127.0.0.1:8808" };
    assert.equal(externalBase(req(other), trusted), "http://127.0.0.1:8808", "X-Forwarded-Host not among the allowed hosts");
    assert.equal(externalBase(req(forwarded), { ...trusted, hostAllowed: undefined }), "http://10.0.0.5:8808", "no host rule: forwarded host unused");
    // The Host guard lets any loopback name through; tokens for http://localhost:4444/mcp must not become valid on :8808.
    assert.equal(externalBase(req({ host: "localhost:4444" }), plain), "http://127.0.0.1:8808");
    assert.equal(externalBase(req({ host: "localhost" }), plain), "http://127.0.0.1:8808", "no port is :80");
    assert.equal(externalBase(req({ host: "localhost:8808" }), { ...plain, listenAddress: () => undefined }), "http://127.0.0.1", "not listening yet");
  });
});

describe("OAuth counts as authentication for the beyond-loopback checks", () => {
  test("no exposure warning when OAuth is on; the warning when neither token nor OAuth is set", () => {
    const open = gatewaySettingsSchema.parse({ host: "0.0.0.0" });
    assert.equal(callersAuthenticated(open), false);
    assert.match(exposureWarning(open) ?? "", /WITHOUT A TOKEN/);
    const oauth = gatewaySettingsSchema.parse({ host: "0.0.0.0", auth: { oauth: { issuers: ["https://login.example.com"] } } });
    assert.equal(callersAuthenticated(oauth), true);
    assert.equal(exposureWarning(oauth), undefined);
  });
});
