/**
 * An upstream session (Streamable HTTP) across gateway restarts (ADR 0007,
 * "Sessions across restarts"): what is kept of it (UpstreamSessionSnapshot),
 * what the owner keeps for the connection (ConnectionPersistence), continuing
 * a stored session instead of initializing (and hearing it is gone), setting
 * the client's logging level and subscriptions again on a new session, and
 * ending it with a bounded DELETE. The connection's lifecycle fields stay in
 * connection.ts, which calls these at the points of its lifecycle.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LATEST_PROTOCOL_VERSION, type Implementation, type LoggingLevel, type ServerCapabilities } from "@modelcontextprotocol/sdk/types.js";
import { systemClock, type Clock, type TimerHandle } from "../clock.js";
import type { Logger } from "../logging.js";
import { errorMessage } from "../errors.js";
import type { UpstreamRequests } from "./requests.js";
import type { CreatedTransport } from "./transport-types.js";

/** An upstream session (Streamable HTTP) as the gateway keeps it: its id and what its initialize negotiated. */
export interface UpstreamSessionSnapshot {
  sessionId: string;
  protocolVersion: string;
  capabilities: ServerCapabilities;
  serverInfo: Implementation;
  instructions?: string | undefined;
}

/**
 * What the owner (the session) keeps for this upstream across connections
 * and gateway restarts. The getters are read when the connection opens.
 */
export interface ConnectionPersistence {
  /** An upstream session to continue instead of initializing a new one (once, after a gateway restart). */
  resume(): UpstreamSessionSnapshot | undefined;
  /** The client's logging level, set again on a new upstream session. */
  logLevel(): LoggingLevel | undefined;
  /** The resource URIs the client subscribed to on this upstream, subscribed again on a new upstream session. */
  subscriptions(): readonly string[];
  /** A Streamable HTTP connection opened (or continued) this upstream session. */
  sessionOpened(snapshot: UpstreamSessionSnapshot): void;
  /** The session `resume()` named is gone upstream (a new one replaces it): what ran in it is lost. The connection waits for it. */
  sessionLost(previousSessionId: string, reason: string): Promise<void> | void;
  subscriptionChanged(uri: string, subscribed: boolean): void;
  loggingLevelSet(level: LoggingLevel): void;
}

/** "end": the owner's session ended (the upstream session is DELETEd); "suspend": the gateway stops and the session resumes after its restart. */
export type CloseMode = "end" | "suspend";

/** Bound on the DELETE that ends an upstream session (a gone upstream must not hold up a close). */
const TERMINATE_TIMEOUT_MS = 5_000;

/** What the continuation steps need of the connection. */
export interface ContinuationContext {
  name: string;
  logger: Logger;
  persistence?: ConnectionPersistence | undefined;
  connectTimeoutMs: number;
}

/**
 * The transport was created with a stored session id, so the client skipped
 * initialize: set the session's protocol version and ask the upstream
 * whether it still knows the session (a ping). True: continued. False: the
 * upstream answered 404 (MCP's "session not found"; server-everything says
 * 400), the stored session is gone and this client is discarded. Any other
 * failure goes to `failed` (the connection throws EMCP_UPSTREAM_UNAVAILABLE;
 * the session stays stored, to be tried again on next use).
 */
export async function continueSession(
  ctx: ContinuationContext,
  client: Client,
  created: CreatedTransport,
  resume: UpstreamSessionSnapshot,
  failed: (err: unknown) => Promise<never>,
): Promise<boolean> {
  const { name, logger, persistence } = ctx;
  created.continueSession?.(resume.protocolVersion);
  try {
    await client.ping({ timeout: ctx.connectTimeoutMs });
  } catch (err) {
    if (!(err instanceof StreamableHTTPError && (err.code === 404 || err.code === 400))) return failed(err);
    const reason = `upstream '${name}' no longer knows its MCP session from before the gateway restarted (HTTP ${err.code}); a new session replaced it, and what ran in the old one (its tasks) is lost`;
    logger.warn({ server: name, status: err.code }, "upstream_session_lost");
    // Not connected yet: handleClose ignores this close.
    await client.close().catch(() => undefined);
    // Before the connection is used: nothing may ask the new session about the old one's tasks.
    await persistence?.sessionLost(resume.sessionId, reason);
    return false;
  }
  const opened = created.openStandaloneStream?.((err) => logger.debug({ server: name, err: errorMessage(err) }, "upstream_standalone_stream_failed"));
  if (opened === false) logger.warn({ server: name }, "sdk_standalone_stream_unavailable");
  return true;
}

/**
 * The HTTP status when `err` says the upstream no longer knows the session:
 * 404 (MCP: session not found) or the SDK server's 400 "No valid session ID".
 */
export function sessionGone(err: unknown): number | undefined {
  if (!(err instanceof StreamableHTTPError)) return undefined;
  if (err.code === 404 || (err.code === 400 && /session/i.test(err.message))) return err.code;
  return undefined;
}

/** What a new upstream session negotiated, as kept for continuing it. */
export function snapshot(name: string, sessionId: string, client: Client, created: CreatedTransport | undefined): UpstreamSessionSnapshot {
  const instructions = client.getInstructions();
  return {
    sessionId,
    protocolVersion: created?.protocolVersion?.() ?? LATEST_PROTOCOL_VERSION,
    capabilities: client.getServerCapabilities() ?? {},
    serverInfo: client.getServerVersion() ?? { name, version: "unknown" },
    ...(instructions !== undefined ? { instructions } : {}),
  };
}

/** A new upstream session: the client's logging level and subscriptions, set again (failures logged, not thrown). */
export async function restore(
  ctx: ContinuationContext,
  connection: Pick<UpstreamRequests, "capabilities" | "setLoggingLevel" | "subscribeResource">,
): Promise<void> {
  const persistence = ctx.persistence;
  if (!persistence) return;
  const { name, logger } = ctx;
  const level = persistence.logLevel();
  if (level !== undefined && connection.capabilities?.logging) {
    await connection.setLoggingLevel(level).catch((err: unknown) => logger.warn({ server: name, level, err: errorMessage(err) }, "upstream_restore_failed"));
  }
  for (const uri of persistence.subscriptions()) {
    await connection.subscribeResource(uri).catch((err: unknown) => logger.warn({ server: name, uri, err: errorMessage(err) }, "upstream_restore_failed"));
  }
}

/** DELETE of the upstream session (Streamable HTTP), bounded by TERMINATE_TIMEOUT_MS (or the request timeout, if shorter); failures are only logged. */
export async function terminateSession(
  ctx: { name: string; logger: Logger; requestTimeoutMs: number; clock?: Clock | undefined },
  created: CreatedTransport | undefined,
): Promise<void> {
  if (!created?.terminateSession) return;
  const terminate = () => created.terminateSession!();
  const clock = ctx.clock ?? systemClock;
  let timer: TimerHandle | undefined;
  const bound = new Promise<void>((resolve) => (timer = clock.setTimeout(resolve, Math.min(TERMINATE_TIMEOUT_MS, ctx.requestTimeoutMs))));
  await Promise.race([
    terminate().catch((err: unknown) => ctx.logger.debug({ server: ctx.name, err: errorMessage(err) }, "upstream_session_delete_failed")),
    bound,
  ]);
  clock.clearTimeout(timer);
}
