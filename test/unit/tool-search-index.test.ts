/**
 * The tool search index (src/faces/meta/search/): terms, views kept apart
 * (a query reads only the caller's views), a changed list replacing the
 * oldest view beyond the bound, removed servers forgotten.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { ToolSearchIndex } from "../../src/faces/meta/search/index.js";
import { queryTerms, tokenize } from "../../src/faces/meta/search/terms.js";

const tool = (name: string, description: string, params: string[] = []): Tool => ({
  name,
  description,
  inputSchema: { type: "object", properties: Object.fromEntries(params.map((p) => [p, { type: "string" }])) },
});

test("terms: identifiers split, stop words dropped, plurals and -ing/-ed meet their stem", () => {
  assert.deepEqual(tokenize("readFile read_file read-file HTTPServer"), ["read", "File", "read", "file", "read", "file", "HTTP", "Server"]);
  assert.deepEqual(queryTerms("Read the files"), ["read", "file"]);
  assert.deepEqual(queryTerms("creating created create"), ["creat", "creat", "creat"]);
  assert.deepEqual(queryTerms("the a of ?!"), []);
});

test("a query finds only the views it is given: another caller's view never matches", () => {
  const index = new ToolSearchIndex();
  const alice = index.add("ops", [tool("deploy_service", "Deploy a service"), tool("restart_service", "Restart a service")]);
  const bob = index.add("ops", [tool("restart_service", "Restart a service")]);
  assert.notEqual(alice, bob);
  assert.deepEqual(
    index.query("deploy", new Set([bob])).map((h) => h.name),
    [],
  );
  assert.deepEqual(
    index.query("deploy", new Set([alice])).map((h) => h.name),
    ["deploy_service"],
  );
  assert.equal(index.add("ops", [tool("restart_service", "Restart a service")]), bob, "the same view is indexed once");
  assert.equal(index.size, 3);
});

test("a changed list is a new view; beyond eight per server the oldest goes; removed servers are forgotten", () => {
  const index = new ToolSearchIndex();
  const keys = Array.from({ length: 10 }, (_, i) => index.add("s", [tool(`tool_${i}`, `Version ${i} of the list`)]));
  assert.equal(index.size, 8);
  assert.deepEqual(index.query("version", new Set(keys.slice(0, 2))), [], "the two oldest views are gone");
  assert.equal(index.query("version", new Set(keys)).length, 8);
  index.add("other", [tool("ping", "Ping")]);
  index.retain(new Set(["other"]));
  assert.equal(index.size, 1);
  assert.equal(index.tool(keys[9]!, "s", "tool_9"), undefined);
});
