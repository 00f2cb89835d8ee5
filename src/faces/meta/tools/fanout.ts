/**
 * Runs one read on one server or on all servers of the session, keeping
 * per-server failures as `error` entries instead of failing the whole call.
 */
import { toToolErrorText } from "../../../errors.js";
import type { UpstreamHandle } from "../../../upstream/handle.js";
import type { MetaContext } from "../define.js";

export type PerServer<T> = { server: string; items: T[] } | { server: string; error: string };

export async function fanout<T>(
  { session, gateway }: MetaContext,
  server: string | undefined,
  read: (conn: UpstreamHandle) => Promise<T[]>,
): Promise<PerServer<T>[]> {
  if (server !== undefined) {
    const conn = await session.connection(server);
    return [{ server, items: await read(conn) }];
  }
  return Promise.all(
    gateway.registry.names(session).map(async (name): Promise<PerServer<T>> => {
      try {
        return { server: name, items: await read(await session.connection(name)) };
      } catch (err) {
        return { server: name, error: toToolErrorText(err, session.logger) };
      }
    }),
  );
}

/** Renames `items` to the collection name the tool documents (tools, resources, ...). */
export function named<T>(key: string, rows: PerServer<T>[]) {
  return rows.map((r) => ("items" in r ? { server: r.server, [key]: r.items } : r));
}
