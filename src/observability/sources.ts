/**
 * What the collect-time gauges read (MetricsSources), from the gateway's own
 * state: the SessionManager's sessions (their upstream connections and
 * pending client requests), the stdio child limiter, and each open session's
 * tasks in the store. Also which face each session was opened on (a promoted
 * task is a tool task of a meta-face session) and, when it ends, its duration.
 */
import { shownStatus } from "../mcp/task-object.js";
import type { SessionManager } from "../session/session-manager.js";
import type { Store } from "../store/contracts.js";
import type { ChildProcessLimiter } from "../upstream/children.js";
import type { ServerRegistry } from "../upstream/registry.js";
import type { MetricsSources, TaskKindLabel } from "./metrics.js";
import type { GatewayMetrics } from "./metrics.js";
import type { NetworkTransport } from "./semconv.js";

/** The face a session was opened on: "meta", "all", "server" (one upstream) or "stdio". */
export type FaceLabel = "meta" | "all" | "server" | "virtual" | "stdio";

export class SessionFaces {
  private readonly faces = new Map<string, { face: FaceLabel; transport: NetworkTransport; opened: number }>();

  constructor(
    private readonly metrics: GatewayMetrics | undefined,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** A face was built for `sessionId` (the first one counts: a meta face attached to a session adds nothing). */
  opened(sessionId: string, face: FaceLabel, transport: NetworkTransport): void {
    if (!this.faces.has(sessionId)) this.faces.set(sessionId, { face, transport, opened: this.now() });
  }

  faceOf(sessionId: string): FaceLabel | undefined {
    return this.faces.get(sessionId)?.face;
  }

  /** The session ended: its duration is observed. */
  ended(sessionId: string): void {
    const entry = this.faces.get(sessionId);
    if (!entry) return;
    this.faces.delete(sessionId);
    this.metrics?.sessionEnded(entry.face, entry.transport, (this.now() - entry.opened) / 1000);
  }
}

export interface GatewayState {
  sessions: SessionManager;
  registry: ServerRegistry;
  faces: SessionFaces;
  children: ChildProcessLimiter;
  /** The open store (undefined before start). */
  store(): Store | undefined;
  /** Whether the store can serve, as /readyz asks it (absent: taken as healthy). */
  storeHealthy?: () => boolean | Promise<boolean>;
}

export function gatewaySources(state: GatewayState): MetricsSources {
  return {
    sessionsByFace() {
      const counts: Record<string, number> = {};
      for (const session of state.sessions.list()) {
        const face = state.faces.faceOf(session.id) ?? "unknown";
        counts[face] = (counts[face] ?? 0) + 1;
      }
      return counts;
    },
    upstreamConnections() {
      // A server a session has not used yet (lazy connect) is "not_connected": not a connection, not counted.
      const names = state.registry.names();
      return state.sessions.list().flatMap((session) =>
        names.flatMap((upstream) => {
          const { status } = session.view(upstream);
          return status === "not_connected" ? [] : [{ upstream, status }];
        }),
      );
    },
    stdioChildren: () => state.children.count,
    stdioChildLimit: () => state.children.limit,
    storeHealthy: () => state.storeHealthy?.() ?? true,
    pendingClientRequests() {
      return state.sessions
        .list()
        .flatMap((session) => [
          ...session.pending.list("elicitation").map(() => ({ kind: "elicitation" })),
          ...session.pending.list("sampling").map(() => ({ kind: "sampling" })),
        ]);
    },
    async tasks() {
      const store = state.store();
      if (!store) return [];
      const all = await Promise.all(
        state.sessions.list().map(async (session) => {
          const meta = state.faces.faceOf(session.id) === "meta";
          const records = await store.tasks.listBySession(session.id).catch(() => []);
          return records.map((r) => {
            const kind: TaskKindLabel = r.kind === "receiver" ? "receiver" : r.upstreamTaskId !== undefined ? "upstream" : meta ? "promoted" : "gateway";
            return { status: shownStatus(r), kind };
          });
        }),
      );
      return all.flat();
    },
  };
}
