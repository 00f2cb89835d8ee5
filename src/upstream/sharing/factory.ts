/**
 * How sessions reach upstreams beyond their own connections (docs/adr/0010):
 * the warm pool (stdio servers in session mode get a process started ahead,
 * once used; `serve` only, start()) and the shared connections of servers
 * with "sharing": "shared". Both follow the registry: a server removed or
 * changed ends its waiting processes and retires its shared connection.
 * The composition root (gateway.ts) gives sessions `transportFactory` and
 * `shared`, and closes both after the sessions.
 */
import type { Clock, IdGenerator } from "../../clock.js";
import type { GatewaySettings } from "../../config/schema.js";
import { isStdioConfig } from "../../config/server-entry.js";
import type { Logger } from "../../logging.js";
import type { Store } from "../../store/contracts.js";
import { ReceiverTaskStore, receiverTaskOptions } from "../receiver-tasks.js";
import type { ChildProcessLimiter } from "../children.js";
import { entrySharing, isRuntime, type ServerRegistry } from "../registry.js";
import { SharedUpstreams } from "./shared-upstreams.js";
import type { TransportFactory } from "../transports.js";
import { WarmPool } from "./warm-pool.js";
import type { Implementation } from "@modelcontextprotocol/sdk/types.js";

export interface UpstreamSharingOptions {
  registry: ServerRegistry;
  settings: GatewaySettings;
  transportFactory: TransportFactory;
  children: ChildProcessLimiter;
  clientInfo: Implementation;
  clock: Clock;
  newId: IdGenerator;
  logger: Logger;
  /** The open state store (shared connections keep their receiver tasks there). */
  store: () => Store;
}

export interface UpstreamSharing {
  /** The factory session connections use (the warm pool's). */
  readonly transportFactory: TransportFactory;
  readonly shared: SharedUpstreams;
  /** Turns the warm pool on (`serve`). */
  start(): void;
  /** Ends the shared connections and the waiting processes (after the sessions have closed). */
  close(): Promise<void>;
}

export function createUpstreamSharing(o: UpstreamSharingOptions): UpstreamSharing {
  const { registry, settings, children, clientInfo, logger } = o;
  const warm = new WarmPool(o.transportFactory, {
    size: settings.upstream.warmPool,
    children,
    logger,
    warmable: (name) => {
      const entry = registry.get(name);
      return entry && isStdioConfig(entry.config) && entrySharing(entry, settings) === "session" ? entry.config : undefined;
    },
  });
  children.reclaim = (server) => warm.reclaim(server);
  registry.onChange((name) => warm.evict(name));
  const shared = new SharedUpstreams(
    registry,
    (name) => ({
      name,
      config: registry.require(name).config,
      // Shared runtime servers have no credentials (entrySharing); their URL rules still apply (docs/adr/0015).
      runtime: isRuntime(registry.require(name)),
      transportFactory: o.transportFactory,
      clientInfo,
      connectTimeoutMs: settings.upstream.connectTimeoutMs,
      requestTimeoutMs: settings.upstream.requestTimeoutMs,
      livenessPingMs: settings.upstream.livenessPingMs,
      pingTimeoutMs: settings.upstream.pingTimeoutMs,
      clock: o.clock,
      logger,
      newReceiverTasks: () =>
        new ReceiverTaskStore(
          receiverTaskOptions(settings.tasks, { sessionId: `shared:${name}`, server: name, store: o.store().tasks, logger, clock: o.clock, newId: o.newId }),
        ),
      // No `roots`: servers cache the roots per connection, and one session's roots must not reach another's calls (ADR 0010).
      children,
    }),
    logger,
  );
  return {
    transportFactory: warm.factory,
    shared,
    start: () => warm.start(),
    async close() {
      await shared.close();
      await warm.close();
    },
  };
}
