/**
 * The audit page's filters run in SQLite on the version-12 expression indexes
 * (src/store/sqlite/decisions.ts decisionSql), not by scanning the table.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { SqliteDb } from "../../src/store/sqlite/db.js";
import { decisionSql } from "../../src/store/sqlite/decisions.js";
import type { DecisionQuery } from "../../src/store/contracts.js";

test("each audit filter's query plan searches a decisions index", async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "emceepee-decisions-plan-"));
  const db = SqliteDb.open(path.join(dir, "state.db"));
  try {
    const plan = (q: DecisionQuery) => {
      const { sql, args } = decisionSql(q);
      return (db.stmt(`EXPLAIN QUERY PLAN ${sql}`).all(...args) as Array<{ detail: string }>).map((r) => r.detail).join(" | ");
    };
    assert.match(plan({ principalHash: "0123456789abcdef", limit: 50 }), /SEARCH decisions USING INDEX decisions_by_principal/);
    assert.match(plan({ server: "fs", tool: "read_file", limit: 50 }), /SEARCH decisions USING INDEX decisions_by_call/);
    assert.match(plan({ server: "fs", limit: 50 }), /SEARCH decisions USING INDEX decisions_by_call/);
    assert.match(plan({ outcome: "deny", limit: 50, before: { at: 5, id: "x" } }), /SEARCH decisions USING INDEX decisions_by_outcome/);
    assert.match(plan({ since: 1, until: 9, limit: 50 }), /SEARCH decisions USING INDEX decisions_by_time/);
  } finally {
    db.close();
    await rm(dir, { recursive: true, force: true });
  }
});
