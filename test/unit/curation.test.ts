/**
 * Curation per caller (src/governance/curation.ts, docs/adr/0024): the first
 * entry matching the principal applies; a rename makes the upstream name
 * unknown to that caller only; fixed arguments leave the schema and are always
 * sent; defaults fill; the config refuses what could never apply. And the
 * transparent face's mapping (faces/transparent/curated.ts): a rename onto an
 * upstream name shadows that tool, a virtual server lists its chosen tools.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { makePrincipal } from "../../src/auth/principal.js";
import { governanceSchema } from "../../src/config/governance.js";
import { parseConfigDetailed } from "../../src/config/load.js";
import { Curation } from "../../src/governance/curation.js";
import { Catalog } from "../../src/faces/transparent/catalog.js";
import { faceTools, resolveTool } from "../../src/faces/transparent/curated.js";

const alice = makePrincipal({ issuer: "https://idp.example", subject: "alice", scopes: [], claims: { groups: ["ops"] } });
const bob = makePrincipal({ issuer: "https://idp.example", subject: "bob", scopes: [], claims: { groups: ["staff"] } });

const deploy: Tool = {
  name: "deploy",
  description: "Deploys",
  inputSchema: { type: "object", properties: { env: { type: "string" }, tag: { type: "string" }, dry: { type: "boolean" } }, required: ["env", "tag"] },
  annotations: { destructiveHint: true, openWorldHint: true },
};
const status: Tool = { name: "status", inputSchema: { type: "object" } };

const curation = (raw: unknown) => new Curation(governanceSchema.parse({ curation: raw }));

test("curation: per principal, first entry wins; rename, overrides, fixed and default arguments", () => {
  const c = curation([
    { server: "ci", tool: "deploy", principal: { claims: { groups: "ops" } }, name: "ship", annotations: { destructiveHint: false } },
    { server: "ci", tool: "deploy", arguments: { fixed: { env: "staging" }, defaults: { dry: true } }, description: "Deploy to staging" },
  ]);
  // alice (ops): renamed, annotations merged, schema untouched (her entry has no arguments).
  const forAlice = c.view(alice, "ci", deploy);
  assert.equal(forAlice.name, "ship");
  assert.deepEqual(forAlice.annotations, { destructiveHint: false, openWorldHint: true });
  assert.deepEqual(forAlice.inputSchema, deploy.inputSchema);
  assert.equal(c.upstreamName(alice, "ci", "ship"), "deploy");
  assert.equal(c.upstreamName(alice, "ci", "deploy"), undefined, "the upstream name is unknown to alice");
  // bob: the second entry — env fixed (out of the schema), dry defaulted (shown, not required).
  const forBob = c.view(bob, "ci", deploy);
  assert.equal(forBob.name, "deploy");
  assert.equal(forBob.description, "Deploy to staging");
  assert.deepEqual(Object.keys(forBob.inputSchema.properties ?? {}).sort(), ["dry", "tag"]);
  assert.deepEqual((forBob.inputSchema.properties as Record<string, { default?: unknown }>).dry?.default, true);
  assert.deepEqual(forBob.inputSchema.required, ["tag"]);
  assert.equal(c.upstreamName(bob, "ci", "ship"), "ship", "bob has no 'ship': the name passes through (the upstream says it is unknown)");
  assert.deepEqual(c.arguments(bob, "ci", "deploy", { tag: "v1" }), { dry: true, tag: "v1", env: "staging" });
  assert.deepEqual(c.arguments(bob, "ci", "deploy", { tag: "v1", dry: false }), { dry: false, tag: "v1", env: "staging" });
  assert.throws(() => c.arguments(bob, "ci", "deploy", { tag: "v1", env: "prod" }), /EMCP_BAD_ARGUMENTS|sets 'env' of 'deploy' itself/);
  // Not curated: unchanged.
  assert.equal(c.view(bob, "ci", status), status);
  assert.deepEqual(c.arguments(bob, "ci", "status", { x: 1 }), { x: 1 });
});

test("curation settings: what could never apply is refused with the key and what to do", () => {
  const problems = (raw: unknown) => {
    const r = governanceSchema.safeParse(raw);
    return r.success ? "" : r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("\n");
  };
  assert.match(problems({ curation: [{ server: "a", tool: "t", name: "has space" }] }), /curation\.0\.name: a tool name is 1 to 128/);
  assert.match(problems({ curation: [{ server: "a", tool: "t", arguments: { fixed: { x: 1 }, defaults: { x: 2 } } }] }), /fixed already/);
  assert.match(
    problems({
      curation: [
        { server: "a", tool: "t" },
        { server: "a", tool: "t", name: "u" },
      ],
    }),
    /curation\.1: .*never applies/,
  );
  assert.match(
    problems({
      virtualServers: [
        {
          name: "v",
          tools: [
            { server: "a", tool: "t" },
            { server: "b", tool: "t" },
          ],
        },
      ],
    }),
    /virtualServers\.0\.tools\.1: .*"as"/,
  );
  assert.match(
    problems({ virtualServers: [{ name: "v", tools: [{ server: "a", tool: "t" }], rules: [{ action: "deny" }] }] }),
    /profile is "enforce" or "dry-run"/,
  );
  assert.match(problems({ virtualServers: [{ name: "a/b", tools: [{ server: "a", tool: "t" }] }] }), /URL path segment/);
  assert.equal(problems({ profile: "enforce", virtualServers: [{ name: "v", tools: [{ server: "a", tool: "t" }], rules: [{ action: "deny" }] }] }), "");
});

test("a transparent face's curated mapping: shadowing, the aggregate prefix, a virtual server's chosen tools", () => {
  const settings = governanceSchema.parse({
    curation: [{ server: "ci", tool: "deploy", name: "status" }],
    virtualServers: [
      {
        name: "kit",
        tools: [
          { server: "ci", tool: "deploy", as: "go" },
          { server: "docs", tool: "search" },
        ],
      },
    ],
  });
  const gateway = { curation: new Curation(settings), governance: undefined };
  const rows = [
    { server: "ci", item: deploy },
    { server: "ci", item: status },
    { server: "docs", item: { name: "search", inputSchema: { type: "object" as const } } },
  ];
  const single = { catalog: new Catalog({ kind: "server", server: "ci" }, () => ["ci", "docs"]), gateway };
  // deploy renamed onto status: the upstream's status is shadowed (not listed, and the name calls deploy).
  assert.deepEqual(
    faceTools(single, bob, rows.slice(0, 2)).map((t) => [t.tool.name, t.upstream]),
    [["status", "deploy"]],
  );
  assert.deepEqual(resolveTool(single, bob, "status"), { server: "ci", tool: "deploy" });
  assert.throws(() => resolveTool(single, bob, "deploy"), /EMCP_UNKNOWN_TOOL|unknown tool 'deploy'/);
  const all = { catalog: new Catalog({ kind: "all", separator: "__" }, () => ["ci", "docs"]), gateway };
  assert.deepEqual(
    faceTools(all, bob, rows).map((t) => t.tool.name),
    ["ci__status", "docs__search"],
  );
  const kit = {
    catalog: new Catalog(
      { kind: "virtual", name: "kit" },
      () => ["ci", "docs"],
      () => ["ci", "docs"],
    ),
    gateway,
  };
  assert.deepEqual(
    faceTools(kit, bob, rows).map((t) => [t.tool.name, t.server, t.upstream]),
    [
      ["go", "ci", "deploy"],
      ["search", "docs", "search"],
    ],
  );
  assert.deepEqual(resolveTool(kit, bob, "go"), { server: "ci", tool: "deploy" });
  assert.throws(() => resolveTool(kit, bob, "status"), /virtual server 'kit' has no tool 'status'/);
});

test("curation naming a server the file does not declare: a warning at load (a runtime server may take the name), not an error", () => {
  const { warnings } = parseConfigDetailed({
    mcpServers: { ci: { url: "http://127.0.0.1:9/mcp" } },
    gateway: {
      governance: {
        curation: [{ server: "cj", tool: "deploy", name: "ship" }],
        virtualServers: [
          {
            name: "kit",
            tools: [
              { server: "ci", tool: "deploy" },
              { server: "docs", tool: "search" },
            ],
          },
        ],
      },
    },
  });
  assert.deepEqual(
    warnings.filter((w) => w.startsWith("gateway.governance")),
    [
      "gateway.governance.curation[0].server: no server 'cj' in mcpServers (have: ci); it applies only if a server of that name is added at runtime",
      "gateway.governance.virtualServers[0].tools[1].server: no server 'docs' in mcpServers (have: ci); it applies only if a server of that name is added at runtime",
    ],
  );
});
