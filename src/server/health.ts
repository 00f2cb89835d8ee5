/**
 * The probes (answered before the guards, so they reveal only a status word)
 * and the 503 the MCP endpoints give while the gateway shuts down. /healthz
 * (liveness) is "ok" whenever the process answers; /readyz (readiness) is 200
 * only while the gateway is ready and its store's health check passes.
 */
import type { ProbeReply } from "../http/server.js";

export type GatewayState = "starting" | "ready" | "closing";

export interface Health {
  probes: Record<string, () => ProbeReply | Promise<ProbeReply>>;
  /** While closing, why MCP requests are refused (503). */
  unavailable(): string | undefined;
}

export function createHealth(state: () => GatewayState, storeHealthy: () => boolean | Promise<boolean>): Health {
  const readiness = (storeOk: boolean): ProbeReply => {
    const now = state();
    if (now !== "ready") return { status: 503, body: { status: now === "closing" ? "shutting_down" : "starting" } };
    return storeOk ? { status: 200, body: { status: "ready" } } : { status: 503, body: { status: "store_unavailable" } };
  };
  return {
    probes: {
      // Liveness and readiness only: no counts, names or versions (these answer without a token).
      "/healthz": () => ({ status: 200, body: { status: "ok" } }),
      "/readyz": () => {
        if (state() !== "ready") return readiness(true);
        const ok = storeHealthy();
        return typeof ok === "boolean" ? readiness(ok) : ok.then(readiness);
      },
    },
    unavailable: () => (state() === "closing" ? "the gateway is shutting down; reconnect when it is back" : undefined),
  };
}
