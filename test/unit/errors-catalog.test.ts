/**
 * docs/errors.md is the error catalogue clients read: every code in
 * `ErrorCodes` is documented there with the JSON-RPC code it really maps to,
 * and nothing stale is (as Fastify checks its FST_ERR_* catalogue).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ErrorCodes, GatewayError, toJsonRpcError } from "../../src/errors.js";

const DOC = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../docs/errors.md");

interface Row {
  code: string;
  rpc: number;
  meaning: string;
  action: string;
}

/** The catalogue table: rows `| \`EMCP_X\` | -32602 | meaning | what to do |`. */
function documentedRows(): Row[] {
  const rows: Row[] = [];
  for (const line of readFileSync(DOC, "utf8").split("\n")) {
    const cells = line.split("|").map((c) => c.trim());
    const code = /^`(EMCP_[A-Z_]+)`$/.exec(cells[1] ?? "")?.[1];
    if (code === undefined) continue;
    assert.equal(cells.length, 6, `docs/errors.md: the row of ${code} needs 4 cells (code, JSON-RPC, meaning, what to do): ${line}`);
    rows.push({ code, rpc: Number(cells[2]), meaning: cells[3]!, action: cells[4]! });
  }
  return rows;
}

test("docs/errors.md documents every ErrorCodes code, once, and no other", () => {
  const documented = documentedRows().map((r) => r.code);
  const defined: string[] = Object.values(ErrorCodes);
  assert.ok(documented.length > 0, "docs/errors.md has a catalogue table");
  assert.deepEqual(
    defined.filter((c) => !documented.includes(c)),
    [],
    "codes in src/errors.ts missing from docs/errors.md",
  );
  assert.deepEqual(
    documented.filter((c) => !defined.includes(c)),
    [],
    "codes in docs/errors.md that src/errors.ts does not define (stale)",
  );
  assert.deepEqual(
    documented.filter((c, i) => documented.indexOf(c) !== i),
    [],
    "codes documented twice",
  );
});

test("each documented code says what it means and what to do, with the JSON-RPC code the boundary really sends", () => {
  for (const row of documentedRows()) {
    assert.ok(row.meaning.length > 0 && row.action.length > 0, `${row.code}: meaning and what to do`);
    const reply = toJsonRpcError(new GatewayError(row.code as (typeof ErrorCodes)[keyof typeof ErrorCodes], "probe"));
    assert.equal(row.rpc, reply.code, `${row.code}: docs say ${row.rpc}, toJsonRpcError sends ${reply.code}`);
    assert.equal(reply.message, `${row.code}: probe`);
  }
});

test("the codes the README names are in the catalogue", () => {
  const readme = readFileSync(path.resolve(path.dirname(DOC), "../README.md"), "utf8");
  const named = [...new Set(readme.match(/EMCP_[A-Z_]+/g) ?? [])];
  const defined: string[] = Object.values(ErrorCodes);
  assert.deepEqual(
    named.filter((c) => !defined.includes(c)),
    [],
  );
});
