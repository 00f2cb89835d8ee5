/**
 * Bridge 4 beyond one process (ADR 0032, "Tasks across eras" §6): a 2025
 * gateway task whose call became a 2026-07-28 upstream's extension task is
 * mapped onto that task's id as soon as the upstream names it (reported to
 * whoever runs the call, by async context like modern-call.ts), so the task
 * record carries it as a 2025 upstream task's does. After a restart, or on
 * another replica, the gateway asks about it with the 2025 task methods;
 * here they are answered from the extension's: tasks/get as a 2025 `Task`,
 * tasks/result by driving the task to its end (its inlined result),
 * tasks/cancel as it is. See docs/design/protocol-eras-upstream.md.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { Json } from "./wire.js";

/** What the gateway task keeps of the upstream's extension task. */
export interface ExtensionTaskMapping {
  upstreamTaskId: string;
  pollIntervalMs?: number | undefined;
}

type OnMapped = (mapping: ExtensionTaskMapping) => void;

const current = new AsyncLocalStorage<{ onMapped: OnMapped; taken: boolean }>();

/** Runs `fn` (the upstream tools/call of a gateway task) so that an extension task the upstream makes of it is reported to `onMapped`. */
export function runMappingExtensionTask<T>(onMapped: OnMapped, fn: () => T): T {
  return current.run({ onMapped, taken: false }, fn);
}

/** Whom to tell about the extension task of the tools/call served now, once (undefined: it belongs to no gateway task, or was told). */
export function takeExtensionTaskListener(): OnMapped | undefined {
  const listener = current.getStore();
  if (listener === undefined || listener.taken) return undefined;
  listener.taken = true;
  return listener.onMapped;
}

/** The 2025 task methods the gateway's client sends about an upstream task. */
export const LEGACY_TASK_METHODS: ReadonlySet<string> = new Set(["tasks/get", "tasks/result", "tasks/cancel"]);

/** The extension's requests on one upstream, as the era transport sends them. */
export interface ExtensionTaskWire {
  /** One request upstream; resolves with its result, rejects with the upstream's error. */
  ask(method: string, params: Json): Promise<Json>;
  /** Drives the task from what `tasks/get` said to its end (inputs asked of the client); resolves with the inlined result. */
  drive(task: Json): Promise<Json>;
}

/** A 2025 task method for extension task `taskId`, answered from the extension's (`now`: an ISO time for fields the upstream left out). */
export async function answerLegacyTaskMethod(method: string, taskId: string, wire: ExtensionTaskWire, now: string): Promise<Json> {
  if (method === "tasks/result") return wire.drive(await wire.ask("tasks/get", { taskId }));
  if (method === "tasks/cancel") return legacyTask({ status: "cancelled", ...(await wire.ask("tasks/cancel", { taskId })), taskId }, now);
  return legacyTask({ ...(await wire.ask("tasks/get", { taskId })), taskId }, now);
}

/** A 2025 `Task` from an extension task object (its result and inputRequests are left to tasks/result). */
export function legacyTask(task: Json, now: string): Json {
  const text = (key: string) => (typeof task[key] === "string" ? task[key] : undefined);
  return {
    taskId: task.taskId,
    status: text("status") ?? "working",
    createdAt: text("createdAt") ?? now,
    lastUpdatedAt: text("lastUpdatedAt") ?? text("createdAt") ?? now,
    ttl: typeof task.ttlMs === "number" ? task.ttlMs : null,
    ...(typeof task.pollIntervalMs === "number" ? { pollInterval: task.pollIntervalMs } : {}),
    ...(text("statusMessage") !== undefined ? { statusMessage: text("statusMessage") } : {}),
  };
}
