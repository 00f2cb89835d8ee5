/** Record builders and a per-test store lifecycle for the store contract suite. */
import assert from "node:assert/strict";
import { GatewayError } from "../../src/errors.js";
import type { EventInput, PendingRequestRecord, SessionRecord, TaskRecord } from "../../src/store/contracts.js";
import type { StoreFactory, StoreUnderTest } from "./contract.js";

/** Opens a store, runs the body, and always closes and cleans up. */
export async function withStore(factory: StoreFactory, body: (s: StoreUnderTest) => Promise<void>): Promise<void> {
  const s = await factory();
  try {
    await body(s);
  } finally {
    await s.store.close();
    await s.cleanup?.();
  }
}

/** Asserts that `p` rejects with a GatewayError of `code`; returns it. */
export async function rejectsWith(p: Promise<unknown>, code: string): Promise<GatewayError> {
  const err = await p.then(
    () => assert.fail(`expected ${code}, but it resolved`),
    (e: unknown) => e,
  );
  assert.ok(err instanceof GatewayError, `expected a GatewayError, got ${String(err)}`);
  assert.equal(err.code, code, err.message);
  return err;
}

export function task(taskId: string, sessionId = "s1", patch: Partial<TaskRecord> = {}): TaskRecord {
  return {
    taskId,
    sessionId,
    server: "srv",
    toolName: "tool",
    toolArgs: { n: 1 },
    status: "working",
    createdAt: 1000,
    lastUpdatedAt: 1000,
    ttlMs: 60_000,
    expiresAt: 61_000,
    ...patch,
  };
}

export function session(sessionId: string, patch: Partial<SessionRecord> = {}): SessionRecord {
  return {
    sessionId,
    face: { kind: "meta" },
    protocolVersion: "2025-11-25",
    clientInfo: { name: "test-client", version: "1.0.0" },
    clientCapabilities: { elicitation: {} },
    subscriptions: {},
    upstreamSessionIds: {},
    createdAt: 1000,
    lastActivityAt: 1000,
    ...patch,
  };
}

let eventCounter = 0;

/** An event with a fresh time-sortable id. */
export function event(type = "notification", data: Record<string, unknown> = {}): EventInput {
  eventCounter++;
  return { id: `01EV${String(eventCounter).padStart(8, "0")}`, type, server: "srv", createdAt: 1000 + eventCounter, data };
}

export function pending(requestId: string, sessionId = "s1", patch: Partial<PendingRequestRecord> = {}): PendingRequestRecord {
  return {
    requestId,
    sessionId,
    kind: "elicitation",
    server: "srv",
    params: { message: "name?", requestedSchema: { type: "object", properties: {} } },
    createdAt: 1000,
    expiresAt: 2000,
    ...patch,
  };
}

/** Ids of records, in the order given. */
export function ids(records: ReadonlyArray<{ taskId: string }>): string[] {
  return records.map((r) => r.taskId);
}
