/**
 * What every upstream transport is made as (transports.ts builds the remote
 * ones, transports-stdio.ts the stdio ones): the factory's signature, its
 * options, and what it hands back.
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { FetchLike, SseRequestTap } from "../mcp/sse-request-tap.js";
import type { ServerConfig } from "../config/server-entry.js";
import type { RuntimeUrlRules } from "./url-policy.js";
import type { ProcessGroups } from "./children.js";

export interface CreatedTransport {
  transport: Transport;
  /** For stdio upstreams: the child's stderr, captured into the session's logs. */
  stderr?: NodeJS.ReadableStream | null;
  /**
   * Streamable HTTP: which of our requests' streams each upstream request
   * arrived on (src/mcp/sse-request-tap.ts), for attributing server→client
   * requests to the call they belong to.
   */
  requestStreams?: SseRequestTap;
  /** The upstream's MCP session id (streamable HTTP), read after connect. */
  sessionId?: () => string | undefined;
  /** The protocol version the upstream session uses (streamable HTTP), read after connect. */
  protocolVersion?: () => string | undefined;
  /**
   * Streamable HTTP created with `sessionId`: after `client.connect()` (which
   * then skips initialize), sets the session's protocol version header.
   */
  continueSession?(protocolVersion: string): void;
  /** Continued session: opens the standalone GET stream; false when the SDK cannot (src/mcp/resume-session.ts). */
  openStandaloneStream?(onError: (err: unknown) => void): boolean;
  /** Streamable HTTP: ends the upstream session (HTTP DELETE). */
  terminateSession?(): Promise<void>;
  /** The child's pid (stdio). */
  pid?: () => number | null;
  /**
   * Ends the child's whole process group (stdio): resolves when it is gone.
   * Idempotent; the transport's close() does the same. `graceMs` defaults to
   * the factory's killGraceMs.
   */
  terminate?(graceMs?: number): Promise<void>;
}

export interface TransportOptions {
  /** Continue this upstream session (Streamable HTTP only; other transports ignore it). */
  sessionId?: string | undefined;
  /** A server added at runtime: its URL is checked against gateway.servers.runtimeUrls and redirects are refused (remote-fetch.ts). */
  runtime?: boolean | undefined;
  /** Wraps the remote fetch: a principal's OAuth access token on every request (src/upstream/auth/, the upstream factory sets it). */
  authFetch?: ((base: FetchLike) => FetchLike) | undefined;
}

export type TransportFactory = (name: string, config: ServerConfig, options?: TransportOptions) => CreatedTransport;

export interface TransportFactoryOptions {
  /** gateway.upstream.killGraceMs */
  killGraceMs: number;
  /** gateway.upstream.maxMessageBytes (design LM-6). @default 16 MiB */
  maxMessageBytes?: number | undefined;
  /** Registers every stdio process group (the gateway's close() and destroy() end them all). */
  groups?: ProcessGroups | undefined;
  /** gateway.servers.runtimeUrls (servers added at runtime only). */
  runtimeUrls?: RuntimeUrlRules | undefined;
}
