/**
 * The state store behind a timing proxy: every call of every sub-store
 * (tasks, sessions, events, pending, replay, servers) is observed as
 * `emceepee_store_operation_duration_seconds{store, operation="tasks.get"}`,
 * in one place rather than in each backend; a call that fails also counts in
 * `emceepee_store_errors_total{store, operation}`. What `events.append` returns
 * also tells the metrics what event retention evicted (design EV-4), without
 * a hook in the sessions.
 */
import type { EvictionReport, Store } from "../store/contracts.js";
import type { GatewayMetrics } from "./metrics.js";

const SUB_STORES = ["tasks", "sessions", "events", "pending", "replay", "servers"] as const;

/** `store` with every sub-store call timed (close() and healthy() pass through). */
export function timedStore(store: Store, metrics: GatewayMetrics, now: () => number = () => performance.now()): Store {
  const timed = (part: (typeof SUB_STORES)[number]): object => {
    const target = store[part] as unknown as Record<string, unknown>;
    const cache = new Map<string, unknown>();
    return new Proxy(target, {
      get(obj, key, receiver) {
        const value: unknown = Reflect.get(obj, key, receiver);
        if (typeof value !== "function" || typeof key !== "string") return value;
        let wrapped = cache.get(key);
        if (!wrapped) {
          const operation = `${part}.${key}`;
          const timer = metrics.storeTimer(store.kind, operation);
          const failed = metrics.storeErrorCounter(store.kind, operation);
          const fn = value as (...args: unknown[]) => unknown;
          wrapped = (...args: unknown[]) => {
            const started = now();
            const observe = () => timer((now() - started) / 1000);
            let result: unknown;
            try {
              result = fn.apply(obj, args);
            } catch (err) {
              observe();
              failed();
              throw err;
            }
            if (!(result instanceof Promise)) {
              observe();
              return result;
            }
            return result.then(
              (value: unknown) => {
                observe();
                if (operation === "events.append") evictedBy(metrics, value as { evicted?: EvictionReport[] });
                return value;
              },
              (err: unknown) => {
                observe();
                failed();
                throw err;
              },
            );
          };
          cache.set(key, wrapped);
        }
        return wrapped;
      },
    });
  };
  const parts = Object.fromEntries(SUB_STORES.map((part) => [part, timed(part)]));
  return new Proxy(store, {
    get(obj, key, receiver) {
      if (typeof key === "string" && Object.hasOwn(parts, key)) return parts[key];
      const value: unknown = Reflect.get(obj, key, receiver);
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(obj) : value;
    },
  });
}

function evictedBy(metrics: GatewayMetrics, result: { evicted?: EvictionReport[] } | undefined): void {
  for (const report of result?.evicted ?? []) metrics.eventsEvicted(report.reason, report.count);
}
