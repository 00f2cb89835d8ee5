/**
 * sessionHash remembers recent sessions' hashes (issue 27: it is asked on
 * every call) and still answers the first 8 hex digits of the id's SHA-256,
 * for any number of sessions.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { sessionHash } from "../../src/logging.js";

const expected = (id: string): string => createHash("sha256").update(id).digest("hex").slice(0, 8);

test("the hash is the SHA-256 prefix, the same when asked again, across more sessions than are remembered", () => {
  const ids = Array.from({ length: 10_000 }, (_, i) => `session-${i}-${"x".repeat(i % 7)}`);
  for (const id of ids) assert.equal(sessionHash(id), expected(id));
  for (const id of ids.slice(0, 50)) assert.equal(sessionHash(id), expected(id));
  for (const id of ids.slice(-50)) assert.equal(sessionHash(id), expected(id));
  assert.notEqual(sessionHash("a"), sessionHash("b"));
});
