/**
 * The rules both backends share, as pure functions, so the memory and SQLite
 * stores cannot drift: how a task change is applied, which ended tasks a
 * retention bound deletes, how many events a full bound evicts, and the JSON
 * copy that makes every stored record plain data.
 */
import { ErrorCodes, GatewayError } from "../errors.js";
import type { ProxyTaskStatus, TaskPatch, TaskRecord } from "./contracts.js";

/** Event retention (design EV-4): a full bound evicts this part of itself at once. */
export const EVICT_FRACTION = 0.1;

/** How many events a full bound of `bound` evicts (at least one). */
export function evictBatch(bound: number): number {
  return Math.max(1, Math.ceil(bound * EVICT_FRACTION));
}

/** Statuses of a task that has not ended. */
export const ACTIVE_STATUSES: readonly ProxyTaskStatus[] = ["working", "input_required"];

/** When an ended task's row may go: after the retention period, and never before its TTL (counted from creation) is over. */
export function endedRetainUntil(task: Pick<TaskRecord, "createdAt" | "ttlMs">, now: number, retentionMs: number): number {
  return Math.max(now + retentionMs, task.createdAt + task.ttlMs);
}

export function isActive(status: ProxyTaskStatus): boolean {
  return ACTIVE_STATUSES.includes(status);
}

/** A deep copy through JSON: what a record looks like after any backend stored it. */
export function jsonCopy<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

/** The record after a transition or patch (never mutates `record`). */
export function applyTaskChange(
  record: TaskRecord,
  status: ProxyTaskStatus,
  patch: TaskPatch | undefined,
  unset: readonly (keyof TaskPatch)[] | undefined,
): TaskRecord {
  const next: TaskRecord = { ...record, ...jsonCopy(patch ?? {}), status };
  for (const key of unset ?? []) delete next[key];
  return next;
}

/**
 * Which ended tasks a retention bound deletes: `ended` oldest first (by
 * lastUpdatedAt, then taskId); the oldest go while the count or the bytes are
 * over; `keep` is never chosen.
 */
export function retentionVictims(
  ended: ReadonlyArray<{ taskId: string; bytes: number }>,
  maxCount: number,
  maxBytes: number,
  keep: string | undefined,
): string[] {
  let count = ended.length;
  let bytes = ended.reduce((n, r) => n + r.bytes, 0);
  const victims: string[] = [];
  for (const r of ended) {
    if (count <= maxCount && bytes <= maxBytes) break;
    if (r.taskId === keep) continue;
    victims.push(r.taskId);
    count--;
    bytes -= r.bytes;
  }
  return victims;
}

/** Checks a caller-supplied limit (a bad one is a wiring bug, said plainly). */
export function assertLimit(name: string, value: number): void {
  if (!Number.isInteger(value) || value < 1) {
    throw new GatewayError(ErrorCodes.INTERNAL, `store limit ${name} must be a positive integer, got ${String(value)}`);
  }
}

export function duplicateTask(taskId: string): GatewayError {
  return new GatewayError(
    ErrorCodes.INTERNAL,
    `a task with id '${taskId}' is already stored; task ids must be unique (is the id generator shared and monotonic?)`,
    {
      details: { taskId },
    },
  );
}

export function storeClosed(location: string): GatewayError {
  return new GatewayError(ErrorCodes.CLOSED, `the state store (${location}) is closed; the gateway is shutting down`);
}

/** An SSE replay event id as every ReplayStore issues them: the session's sequence number (1…, at most 16 digits). */
export const REPLAY_EVENT_ID = /^[1-9]\d{0,15}$/;
