/**
 * Per-user secret slots (issue 23, docs/adr/0027 §13) in process: the config shape and its messages, and
 * UpstreamSecrets over a memory store — a person's values put into the config (env, formatted header), a missing
 * required slot as EMCP_CONSENT_REQUIRED naming the Connections page and the slot, and values refused on save.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { parseServerEntry, type ServerConfig } from "../../src/config/server-entry.js";
import { ErrorCodes, GatewayError } from "../../src/errors.js";
import { openStore } from "../../src/store/open.js";
import { parseKeys } from "../../src/upstream/auth/keyring.js";
import { UpstreamSecrets } from "../../src/upstream/auth/secrets.js";
import { CredentialVault, Vault } from "../../src/upstream/auth/vault.js";

const messages = (input: unknown) => {
  const r = parseServerEntry(input);
  return r.ok ? [] : r.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
};

describe("secret slots in config", () => {
  test("stdio slots go to env, remote slots to a header; each kind refuses the other's keys", () => {
    const stdio = parseServerEntry({ command: "x", secrets: { TOKEN: { description: "d" }, B: { env: "B_ENV", optional: true } } });
    assert.ok(stdio.ok);
    assert.deepEqual(stdio.entry.config.secrets, { TOKEN: { description: "d" }, B: { env: "B_ENV", optional: true } });
    assert.match(
      messages({ command: "x", secrets: { T: { header: "X" } } }).join("\n"),
      /secrets.T: unknown key .header. in a secret slot .* for remote servers/,
    );
    assert.match(messages({ url: "http://h/mcp", secrets: { T: {} } }).join("\n"), /needs the header to send it in/);
    assert.match(messages({ url: "http://h/mcp", secrets: { T: { header: "X-Key", format: "Bearer" } } }).join("\n"), /must contain \{value\}/);
    assert.match(messages({ command: "x", secrets: { "bad name": {} } }).join("\n"), /secret slot's name/);
    assert.match(messages({ command: "x", secrets: { T: { env: "1BAD" } } }).join("\n"), /environment variable name/);
  });

  test("passthrough is its own auth type, config-only", () => {
    const r = parseServerEntry({ url: "http://h/mcp", auth: { type: "passthrough" } });
    assert.ok(r.ok);
    assert.equal((r.entry.config as { passthrough?: boolean }).passthrough, true);
    assert.equal((r.entry.config as { auth?: unknown }).auth, undefined);
    assert.match(messages({ url: "http://h/mcp", auth: { type: "passthrough", scopes: ["a"] } }).join("\n"), /cannot be combined with OAuth/);
  });
});

describe("UpstreamSecrets", () => {
  const setup = async () => {
    const store = await openStore({ kind: "memory" });
    const vault = new CredentialVault(new Vault(parseKeys(randomBytes(32).toString("base64"), "test")), store.credentials, () => 1000);
    const secrets = new UpstreamSecrets({ vault: () => vault, credentials: () => store.credentials, connectionsUrl: () => "http://gw/console/connections" });
    return { store, secrets };
  };
  const alice = { issuer: "https://idp", subject: "alice" };
  const bob = { issuer: "https://idp", subject: "bob" };

  test("a missing required slot is CONSENT_REQUIRED with the Connections page and the slot; values go into env", async () => {
    const { store, secrets } = await setup();
    const config: ServerConfig = { command: "x", args: [], env: { KEEP: "1" }, secrets: { TOKEN: {}, OPT: { env: "OPT_ENV", optional: true } } };
    await assert.rejects(secrets.resolve("s", config, alice), (err: unknown) => {
      assert.ok(err instanceof GatewayError);
      assert.equal(err.code, ErrorCodes.CONSENT_REQUIRED);
      assert.deepEqual(err.details, { server: "s", authorizationUrl: "http://gw/console/connections", slot: "secret:TOKEN" });
      return true;
    });
    await secrets.save(alice, "s", config, "TOKEN", "alice-value");
    assert.deepEqual(await secrets.resolve("s", config, alice), { ...config, env: { KEEP: "1", TOKEN: "alice-value" } });
    await assert.rejects(secrets.resolve("s", config, bob), /needs your own value/);
    const rows = await secrets.rows(alice, [{ name: "s", config }]);
    assert.deepEqual(
      rows.map((r) => [r.slot, r.set, r.target]),
      [
        ["TOKEN", true, "env TOKEN"],
        ["OPT", false, "env OPT_ENV"],
      ],
    );
    assert.ok(!JSON.stringify(rows).includes("alice-value"));
    assert.ok(await secrets.remove(alice, "s", config, "TOKEN"));
    await assert.rejects(secrets.resolve("s", config, alice), /needs your own value/);
    await store.close();
  });

  test("remote: the header with its format; unusable values and unknown slots are refused", async () => {
    const { store, secrets } = await setup();
    const config: ServerConfig = { url: "http://h/mcp", secrets: { key: { header: "Authorization", format: "Bearer {value}" } } };
    await secrets.save(alice, "r", config, "key", "k1");
    assert.deepEqual(((await secrets.resolve("r", config, alice)) as { headers?: unknown }).headers, { Authorization: "Bearer k1" });
    for (const bad of ["", "a\r\nX-Evil: 1", "a\0b", "x".repeat(8193)]) {
      await assert.rejects(
        secrets.save(alice, "r", config, "key", bad),
        (err: unknown) => err instanceof GatewayError && err.code === ErrorCodes.BAD_ARGUMENTS,
      );
    }
    await assert.rejects(secrets.save(alice, "r", config, "nope", "v"), /has no secret slot "nope"/);
    await store.close();
  });
});
