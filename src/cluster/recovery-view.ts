/**
 * Start-up recovery scoped to orphaned sessions (docs/adr/0013, point 5): the
 * store as ADR 0007's recoverState() sees it, except that `listWorking()` and
 * `pending.listAll()` leave out sessions whose owner replica is alive — a
 * replica's start never fails its neighbours' running calls.
 */
import type { Store } from "../store/contracts.js";
import type { Membership } from "./membership.js";

export function orphansOnly(store: Store, membership: Membership): Store {
  const cache = new Map<string, Promise<boolean>>();
  const orphaned = (sessionId: string): Promise<boolean> => {
    let known = cache.get(sessionId);
    if (!known) {
      known = (async () => {
        const owner = await membership.ownerOf(sessionId);
        return owner === undefined || (await membership.urlOf(owner)) === undefined;
      })();
      cache.set(sessionId, known);
    }
    return known;
  };
  async function keep<T extends { sessionId: string }>(rows: T[]): Promise<T[]> {
    const flags = await Promise.all(rows.map((r) => orphaned(r.sessionId)));
    return rows.filter((_, i) => flags[i]);
  }
  return {
    ...store,
    tasks: { ...bind(store.tasks), listWorking: async () => keep(await store.tasks.listWorking()) },
    pending: { ...bind(store.pending), listAll: async () => keep(await store.pending.listAll()) },
  };
}

/** The methods of a store class instance as bound functions (so they can be spread). */
function bind<T extends object>(target: T): T {
  const out: Record<string, unknown> = {};
  let proto: object | null = target;
  while (proto && proto !== Object.prototype) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      const value = (target as Record<string, unknown>)[name];
      if (name !== "constructor" && typeof value === "function" && !(name in out)) out[name] = (value as (...a: unknown[]) => unknown).bind(target);
    }
    proto = Object.getPrototypeOf(proto) as object | null;
  }
  return out as T;
}
