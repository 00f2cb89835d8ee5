/**
 * docs/config.md against the one config schema: every key path of the
 * `gateway` section is documented with its real default, and no documented
 * key is stale. The schema is walked through z.toJSONSchema (input side, so
 * `.default()` values and optional keys show as they are written in a file).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { DEFAULT_SETTINGS, gatewaySettingsSchema } from "../../src/config/schema.js";

const DOC = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../docs/config.md");

interface JsonSchemaNode {
  type?: string;
  default?: unknown;
  properties?: Record<string, JsonSchemaNode>;
}

/** Leaf key paths of the gateway section and their defaults (undefined: no default). */
function schemaKeys(): Map<string, unknown> {
  const keys = new Map<string, unknown>();
  const walk = (node: JsonSchemaNode, prefix: string): void => {
    for (const [name, child] of Object.entries(node.properties ?? {})) {
      const key = prefix ? `${prefix}.${name}` : name;
      if (child.type === "object" && child.properties) walk(child, key);
      else keys.set(key, child.default);
    }
  };
  walk(z.toJSONSchema(gatewaySettingsSchema, { io: "input" }) as JsonSchemaNode, "");
  return keys;
}

/** The rows of the `## \`gateway\`` table: key → default cell (JSON in backticks, or "none"). */
function documentedKeys(): Map<string, string> {
  const text = readFileSync(DOC, "utf8");
  const start = text.indexOf("## `gateway`");
  assert.ok(start >= 0, "docs/config.md has a `gateway` section");
  const end = text.indexOf("\n## ", start + 1);
  const rows = new Map<string, string>();
  for (const line of text.slice(start, end < 0 ? undefined : end).split("\n")) {
    const cells = line.split("|").map((c) => c.trim());
    const key = /^`([A-Za-z0-9.]+)`$/.exec(cells[1] ?? "")?.[1];
    if (key === undefined) continue;
    assert.ok(!rows.has(key), `docs/config.md documents gateway.${key} twice`);
    rows.set(key, cells[2] ?? "");
  }
  return rows;
}

test("every gateway key is documented in docs/config.md, and every documented key exists", () => {
  const schema = schemaKeys();
  const docs = documentedKeys();
  assert.ok(schema.size > 20, "the walk found the schema's keys");
  assert.deepEqual(
    [...schema.keys()].filter((k) => !docs.has(k)),
    [],
    "gateway keys missing from docs/config.md",
  );
  assert.deepEqual(
    [...docs.keys()].filter((k) => !schema.has(k)),
    [],
    "keys in docs/config.md the schema does not have (stale)",
  );
});

test("each documented default is the schema's default", () => {
  const schema = schemaKeys();
  for (const [key, cell] of documentedKeys()) {
    if (!schema.has(key)) continue; // reported by the test above
    const expected = schema.get(key);
    if (expected === undefined) {
      assert.equal(cell, "none", `gateway.${key} has no default; docs/config.md should say "none"`);
      continue;
    }
    const literal = /^`(.*)`$/.exec(cell)?.[1];
    assert.ok(literal !== undefined, `gateway.${key}: the default cell should be a JSON value in backticks, got ${cell}`);
    assert.deepEqual(JSON.parse(literal), expected, `gateway.${key}: docs/config.md says ${literal}`);
  }
});

test("DEFAULT_SETTINGS is the schema's parse of nothing, frozen all the way down", () => {
  assert.deepEqual(DEFAULT_SETTINGS, gatewaySettingsSchema.parse({}));
  for (const [key, value] of schemaKeys()) {
    const found: unknown = key.split(".").reduce<unknown>((o, k) => (o as Record<string, unknown> | undefined)?.[k], DEFAULT_SETTINGS);
    assert.deepEqual(found, value, `DEFAULT_SETTINGS.${key}`);
  }
  assert.ok(Object.isFrozen(DEFAULT_SETTINGS) && Object.isFrozen(DEFAULT_SETTINGS.upstream.reconnect) && Object.isFrozen(DEFAULT_SETTINGS.allowedHosts));
  assert.throws(() => {
    (DEFAULT_SETTINGS.tasks as { maxTtlMs: number }).maxTtlMs = 1;
  }, TypeError);
});

test("tasks.cleanupIntervalMs is gone: a config that sets it is rejected, naming the key", () => {
  const parsed = gatewaySettingsSchema.safeParse({ tasks: { cleanupIntervalMs: 60_000 } });
  assert.equal(parsed.success, false);
  assert.match(JSON.stringify(parsed.error?.issues), /cleanupIntervalMs/);
});
