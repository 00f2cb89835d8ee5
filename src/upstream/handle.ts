/**
 * UpstreamHandle: what a session holds for one upstream — the request
 * surface (requests.ts) plus what the session and its faces read about the
 * connection behind it. Two kinds exist (docs/adr/0010):
 * - UpstreamConnection (connection.ts): the session's own connection
 *   ("sharing": "session"), whose lifecycle it owns;
 * - SharedUpstreamView (sharing/shared-view.ts): the session's view of the
 *   one connection all sessions share ("sharing": "shared"); closing it
 *   detaches the session, the connection lives on for the others.
 * Both are made in one place: the upstream factory (sharing/factory.ts).
 */
import type { ClientCapabilities, Implementation } from "@modelcontextprotocol/sdk/types.js";
import type { ReceiverTaskStore } from "./receiver-tasks.js";
import { UpstreamRequests } from "./requests.js";
import type { CloseMode } from "./session-continuation.js";

export type ConnectionStatus = "idle" | "connecting" | "connected" | "disconnected" | "error" | "closed";

export abstract class UpstreamHandle extends UpstreamRequests {
  abstract readonly name: string;
  abstract get status(): ConnectionStatus;
  abstract get lastError(): string | undefined;
  /** The stdio child's last lines on stderr (bounded); none for remote upstreams. */
  get stderrLines(): readonly string[] {
    return [];
  }
  abstract get connectedAt(): number | undefined;
  abstract get serverInfo(): Implementation | undefined;
  abstract get instructions(): string | undefined;
  /** The stdio child's pid (null for remote upstreams or while not running). */
  abstract get pid(): number | null;
  /** The upstream's own MCP session id (streamable HTTP only). */
  abstract get upstreamSessionId(): string | undefined;
  /** Whether the connection continued a stored upstream session rather than initializing one. */
  abstract get continuedSession(): boolean;
  /** The capabilities the gateway declared to this upstream. */
  abstract get declaredCapabilities(): ClientCapabilities | undefined;
  /** Whether other sessions use the same connection. */
  abstract get shared(): boolean;
  /** The receiver tasks that die with this handle's own connection, for its owner to close (a shared connection keeps its own: undefined). */
  abstract get receiverTasks(): ReceiverTaskStore | undefined;
  /** Makes the handle usable (connects, or joins the shared connection); throws EMCP_UPSTREAM_UNAVAILABLE. */
  abstract connect(): Promise<void>;
  abstract close(mode?: CloseMode): Promise<void>;
}
