/**
 * Config files of other clients run unchanged (issue 20): keys of their own at
 * the top are ignored with a warning, `$schema` is accepted, VS Code's
 * `servers`/`inputs` format is read, and a disabled server's `${VAR}`s are not
 * required. `emceepee schema`'s JSON Schema is made from the zod schema and
 * agrees with what loadConfig() accepts.
 */
import { test, describe, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Ajv2020 } from "ajv/dist/2020.js";
import { ErrorCodes, GatewayError } from "../../src/errors.js";
import { loadConfig, parseConfigDetailed } from "../../src/config/load.js";
import { inputVariable } from "../../src/config/formats.js";
import { configJsonSchema } from "../../src/config/json-schema.js";
import { demoConfig } from "../../src/config/demo.js";

let tmp: string | undefined;
async function file(content: unknown): Promise<string> {
  tmp ??= await mkdtemp(path.join(os.tmpdir(), "emceepee-formats-"));
  const f = path.join(tmp, `${Math.random().toString(36).slice(2)}.json`);
  await writeFile(f, JSON.stringify(content));
  return f;
}
after(async () => {
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

const configError = (pattern: RegExp) => (err: unknown) => {
  assert.ok(err instanceof GatewayError, String(err));
  assert.equal(err.code, ErrorCodes.CONFIG_INVALID);
  assert.match(err.message, pattern);
  return true;
};

describe("top-level keys of other clients", () => {
  test("Claude Desktop's globalShortcut is ignored with a warning; $schema silently", async () => {
    const f = await file({ $schema: "./emceepee.schema.json", globalShortcut: "Ctrl+Space", mcpServers: { e: { command: "node", args: ["x.js"] } } });
    const config = await loadConfig({ file: f, env: {} });
    assert.deepEqual(Object.keys(config.mcpServers), ["e"]);
    assert.equal(config.warnings.length, 1);
    assert.match(config.warnings[0]!, /^globalShortcut: ignored: not an emceepee setting/);
  });

  test("a near-miss of mcpServers or gateway stays an error (a typo, not another client's key)", () => {
    assert.throws(() => parseConfigDetailed({ mcpservers: {} }), configError(/'mcpservers' \(did you mean 'mcpServers'\?\)/));
  });
});

describe("disabled servers", () => {
  test("a disabled server's ${VAR} is not required; an enabled one's still is", async () => {
    const f = await file({ mcpServers: { off: { disabled: true, command: "x", env: { KEY: "${MISSING_KEY}" } }, on: { command: "y" } } });
    const config = await loadConfig({ file: f, env: {} });
    assert.deepEqual(config.disabledServers, ["off"]);
    assert.deepEqual(Object.keys(config.mcpServers), ["on"]);
    const g = await file({ mcpServers: { on: { command: "x", env: { KEY: "${MISSING_KEY}" } } } });
    await assert.rejects(loadConfig({ file: g, env: {} }), configError(/mcpServers\.on\.env\.KEY: environment variable MISSING_KEY is not set/));
  });
});

describe("VS Code's mcp.json", () => {
  const vscode = {
    inputs: [{ type: "promptString", id: "github-token", description: "GitHub Personal Access Token", password: true }],
    servers: {
      github: { type: "http", url: "https://api.githubcopilot.com/mcp/", headers: { Authorization: "Bearer ${input:github-token}" } },
      fs: { type: "stdio", command: "npx", args: ["-y", "@modelcontextprotocol/server-filesystem", "."], dev: { watch: "src/**" } },
    },
  };

  test("servers are read as mcpServers, ${input:id} from the environment variable named after the id", async () => {
    const config = await loadConfig({ file: await file(vscode), env: { GITHUB_TOKEN: "ghp_example" } });
    assert.deepEqual(Object.keys(config.mcpServers).sort(), ["fs", "github"]);
    assert.deepEqual(config.mcpServers.github, {
      url: "https://api.githubcopilot.com/mcp/",
      transport: "streamable-http",
      headers: { Authorization: "Bearer ghp_example" },
    });
    assert.ok(
      config.warnings.some((w) => /^servers\.fs\.dev: ignored/.test(w)),
      config.warnings.join("\n"),
    );
  });

  test("a substituted value is not scanned again: an input's secret may contain ${", async () => {
    const config = await loadConfig({ file: await file(vscode), env: { GITHUB_TOKEN: "a${HOME}b${input:x}" } });
    assert.deepEqual((config.mcpServers.github as { headers: Record<string, string> }).headers, { Authorization: "Bearer a${HOME}b${input:x}" });
  });

  test("a missing input names its description and the variable to set", async () => {
    await assert.rejects(
      loadConfig({ file: await file(vscode), env: {} }),
      configError(/\$\{input:github-token\} \("GitHub Personal Access Token"\) is prompted for by VS Code.*set environment variable GITHUB_TOKEN/),
    );
  });

  test("both servers and mcpServers is an error that says to keep one", () => {
    assert.throws(() => parseConfigDetailed({ servers: {}, mcpServers: {} }), configError(/both "mcpServers" and VS Code's "servers"; keep one/));
  });

  test("input ids map to environment variable names", () => {
    assert.equal(inputVariable("github-token"), "GITHUB_TOKEN");
    assert.equal(inputVariable("api.key"), "API_KEY");
    assert.equal(inputVariable("1st"), "_1ST");
  });
});

describe("emceepee schema", () => {
  const ajv = new Ajv2020({ strict: false, allErrors: true, logger: false });
  const validate = ajv.compile(configJsonSchema());

  test("the demo config, a Claude Desktop file and a gateway section validate", () => {
    assert.ok(validate(demoConfig()), JSON.stringify(validate.errors));
    const claude = {
      globalShortcut: "x",
      mcpServers: { r: { url: "https://example.com/mcp", headers: { A: "b" } }, s: { command: "npx", args: ["-y", "x"], env: { K: "v" } } },
    };
    assert.ok(validate(claude), JSON.stringify(validate.errors));
    assert.ok(validate({ gateway: { port: 9000, tasks: { maxTtlMs: 60_000 } } }), JSON.stringify(validate.errors));
  });

  test("what the loader refuses, the schema flags too: a typo in gateway, a wrong type, a server with neither command nor url", () => {
    assert.equal(validate({ gateway: { prot: 1 } }), false);
    assert.equal(validate({ gateway: { port: "eighty" } }), false);
    assert.equal(validate({ mcpServers: { x: { args: ["a"] } } }), false);
    assert.equal(validate({ mcpServers: { x: { command: "a", type: "sse" } } }), false);
  });
});
