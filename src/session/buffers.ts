/**
 * BufferManager (design EV-5): per-session, per-server ring buffers.
 * Notifications are also category-1 events (they wake await_activity);
 * logs are category 2: on demand through get_logs only, never a trigger.
 */
import type { Clock } from "../clock.js";
import type { EventSystem } from "./event-system.js";

export interface BufferedNotification {
  server: string;
  /** Epoch ms. */
  timestamp: number;
  method: string;
  params?: Record<string, unknown>;
}

export interface BufferedLog {
  server: string;
  timestamp: number;
  level: string;
  logger?: string;
  data: unknown;
}

/** `gateway.buffers.*` (src/config/schema.ts has each default). */
export interface BufferOptions {
  maxNotificationsPerServer: number;
  maxLogsPerServer: number;
}

class Ring<T> {
  private items: T[] = [];
  constructor(private readonly max: number) {}
  push(item: T): void {
    this.items.push(item);
    if (this.items.length > this.max) this.items.splice(0, this.items.length - this.max);
  }
  drain(): T[] {
    const out = this.items;
    this.items = [];
    return out;
  }
  get length(): number {
    return this.items.length;
  }
}

export class BufferManager {
  private readonly notifications = new Map<string, Ring<BufferedNotification>>();
  private readonly logs = new Map<string, Ring<BufferedLog>>();

  constructor(
    private readonly options: BufferOptions,
    private readonly events: EventSystem,
    private readonly clock: Clock,
  ) {}

  addNotification(server: string, method: string, params: Record<string, unknown> | undefined): void {
    const n: BufferedNotification = { server, timestamp: this.clock.now(), method, ...(params ? { params } : {}) };
    ring(this.notifications, server, this.options.maxNotificationsPerServer).push(n);
    this.events.add("notification", server, { method, ...(params ? { params } : {}) });
  }

  addLog(server: string, level: string, data: unknown, logger?: string): void {
    const log: BufferedLog = { server, timestamp: this.clock.now(), level, data, ...(logger ? { logger } : {}) };
    ring(this.logs, server, this.options.maxLogsPerServer).push(log);
  }

  /** Returns and clears buffered notifications (one server or all). */
  takeNotifications(server?: string): BufferedNotification[] {
    return drain(this.notifications, server);
  }

  /** Returns and clears buffered logs (one server or all). */
  takeLogs(server?: string): BufferedLog[] {
    return drain(this.logs, server);
  }

  clearServer(server: string): void {
    this.notifications.delete(server);
    this.logs.delete(server);
  }
}

function ring<T>(map: Map<string, Ring<T>>, server: string, max: number): Ring<T> {
  let r = map.get(server);
  if (!r) map.set(server, (r = new Ring<T>(max)));
  return r;
}

function drain<T extends { timestamp: number }>(map: Map<string, Ring<T>>, server: string | undefined): T[] {
  if (server !== undefined) return map.get(server)?.drain() ?? [];
  return [...map.values()].flatMap((r) => r.drain()).sort((a, b) => a.timestamp - b.timestamp);
}
