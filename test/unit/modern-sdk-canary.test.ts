/**
 * Canaries for the SDK v2 behaviour src/mcp/modern/ relies on
 * (docs/adr/0032-two-protocol-eras.md): if an upgrade changes any of these,
 * the 2026-07-28 edge must be re-checked.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY, classifyInboundRequest } from "@modelcontextprotocol/server";

const claim = (version: string) => ({ [PROTOCOL_VERSION_META_KEY]: version, [CLIENT_CAPABILITIES_META_KEY]: {} });

/**
 * classifyInboundRequest on a POST of `method` with the modern headers (MCP-Protocol-Version `version`,
 * Mcp-Method `mcpMethod`, Mcp-Name `mcpName`) and `params` (with the claim of `claimed`, unless null).
 */
function classifyModern(
  method: string,
  o: { version?: string; claimed?: string | null; mcpMethod?: string; mcpName?: string; params?: Record<string, unknown> } = {},
): ReturnType<typeof classifyInboundRequest> {
  const version = o.version ?? "2026-07-28";
  const claimed = o.claimed === undefined ? version : o.claimed;
  return classifyInboundRequest({
    httpMethod: "POST",
    protocolVersionHeader: version,
    mcpMethodHeader: o.mcpMethod ?? method,
    ...(o.mcpName ? { mcpNameHeader: o.mcpName } : {}),
    body: { jsonrpc: "2.0", id: 1, method, params: { ...o.params, ...(claimed === null ? {} : { _meta: claim(claimed) }) } },
  });
}

describe("SDK v2 canaries (src/mcp/modern)", () => {
  it("the envelope's key names", () => {
    assert.equal(PROTOCOL_VERSION_META_KEY, "io.modelcontextprotocol/protocolVersion");
    assert.equal(CLIENT_CAPABILITIES_META_KEY, "io.modelcontextprotocol/clientCapabilities");
    assert.equal(CLIENT_INFO_META_KEY, "io.modelcontextprotocol/clientInfo");
  });

  it("a claim routes modern; a plain initialize and a claim-less request route legacy", () => {
    const modern = classifyModern("tools/list");
    assert.equal(modern.kind, "modern");
    const init = classifyInboundRequest({
      httpMethod: "POST",
      body: {
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "x", version: "1" } },
      },
    });
    assert.equal(init.kind, "legacy");
    assert.equal(classifyInboundRequest({ httpMethod: "POST", body: { jsonrpc: "2.0", id: 1, method: "tools/list" } }).kind, "legacy");
  });

  it("a modern header on an envelope-less request is -32602/400; an Mcp-Method mismatch is -32020/400", () => {
    const missing = classifyModern("tools/list", { claimed: null });
    assert.equal(missing.kind, "reject");
    if (missing.kind === "reject") assert.deepEqual([missing.code, missing.httpStatus], [-32602, 400]);
    const mismatch = classifyModern("tools/list", { mcpMethod: "prompts/list" });
    assert.equal(mismatch.kind, "reject");
    if (mismatch.kind === "reject") assert.deepEqual([mismatch.code, mismatch.httpStatus], [-32020, 400]);
  });

  it("the classifier does not judge the claimed version nor Mcp-Name (envelope.ts does both)", () => {
    const future = classifyModern("tools/list", { version: "2099-01-01" });
    assert.equal(future.kind, "modern");
    const name = classifyModern("tools/call", { mcpName: "other", params: { name: "echo" } });
    assert.equal(name.kind, "modern");
  });
});
