/**
 * SDK workarounds — continuing an MCP session that a restart interrupted, on
 * both sides of the gateway (ADR 0007); uses the transport's private
 * `_startOrAuthSse` (canaries: test/unit/sdk-canaries.test.ts). See
 * docs/design/upstreams-and-reliability.md, "How the code keeps it".
 */
import { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { Duplex, Writable } from "node:stream";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { ClientCapabilities, Implementation } from "@modelcontextprotocol/sdk/types.js";
import { systemClock, type Clock, type TimerHandle } from "../clock.js";

/** What the client's initialize said, as stored for its session. */
export interface StoredInitialize {
  protocolVersion: string;
  capabilities: ClientCapabilities;
  clientInfo: Implementation;
}

/** The JSON-RPC id of the synthetic initialize (its response is discarded). */
export const RESUME_REQUEST_ID = "emceepee-resume";

/** Bound on each replayed message (they are answered in-process; only a broken SDK takes longer). */
const REPLAY_TIMEOUT_MS = 10_000;

/**
 * Puts a new transport (already connected to its face's server) into the
 * initialized state of the stored session. Rejects, naming what the SDK
 * answered, when it refuses; the caller then discards the pair.
 */
export async function primeServerTransport(transport: StreamableHTTPServerTransport, init: StoredInitialize, clock: Clock = systemClock): Promise<void> {
  const initialize = { jsonrpc: "2.0", id: RESUME_REQUEST_ID, method: "initialize", params: init };
  const first = await replay(transport, initialize, {}, clock);
  const answer = sseMessages(first.body).find((m) => m.id === RESUME_REQUEST_ID);
  if (first.status !== 200 || !answer || !("result" in answer) || transport.sessionId === undefined) {
    throw new Error(`the SDK server transport refused the replayed initialize (HTTP ${first.status}: ${first.body.slice(0, 300)})`);
  }
  const headers = { "mcp-session-id": transport.sessionId, "mcp-protocol-version": init.protocolVersion };
  const second = await replay(transport, { jsonrpc: "2.0", method: "notifications/initialized" }, headers, clock);
  if (second.status !== 202) {
    throw new Error(`the SDK server transport refused the replayed notifications/initialized (HTTP ${second.status}: ${second.body.slice(0, 300)})`);
  }
}

/** One POST through the transport's public handleRequest, answered into a sink. */
async function replay(
  transport: StreamableHTTPServerTransport,
  body: object,
  extra: Record<string, string>,
  clock: Clock,
): Promise<{ status: number; body: string }> {
  const headers: Record<string, string> = {
    host: "localhost",
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    ...extra,
  };
  const req = new IncomingMessage(nullSocket());
  req.method = "POST";
  req.url = "/";
  req.headers = headers;
  req.rawHeaders = Object.entries(headers).flat();
  req.push(JSON.stringify(body));
  req.push(null);
  const res = new ServerResponse(req);
  const chunks: Buffer[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(chunk);
      done();
    },
  });
  res.assignSocket(sink as unknown as Socket);
  let timer: TimerHandle | undefined;
  const finished = new Promise<void>((resolve, reject) => {
    res.once("finish", resolve);
    res.once("close", resolve);
    timer = clock.setTimeout(
      () => reject(new Error(`the SDK server transport did not answer a replayed message within ${REPLAY_TIMEOUT_MS}ms`)),
      REPLAY_TIMEOUT_MS,
    );
  });
  try {
    // Together: a transport that never answers leaves handleRequest pending too, and the bound must still end the wait.
    await Promise.all([transport.handleRequest(req, res, body), finished]);
  } finally {
    clock.clearTimeout(timer);
    res.detachSocket(sink as unknown as Socket);
  }
  const raw = Buffer.concat(chunks).toString("utf8");
  // The sink saw the whole HTTP message: keep the body only.
  const split = raw.indexOf("\r\n\r\n");
  return { status: res.statusCode, body: split >= 0 ? raw.slice(split + 4) : raw };
}

/** A socket that reads nothing and accepts every write. */
function nullSocket(): Socket {
  return new Duplex({
    read() {},
    write(_chunk, _encoding, done) {
      done();
    },
  }) as unknown as Socket;
}

/** The JSON-RPC messages in an SSE body (or one JSON body). */
function sseMessages(body: string): Array<Record<string, unknown>> {
  const lines = body.split(/\r?\n/).filter((l) => l.startsWith("data:"));
  const texts = lines.length ? lines.map((l) => l.slice(5).trim()) : [body.trim()];
  return texts.flatMap((text): Array<Record<string, unknown>> => {
    try {
      const parsed = JSON.parse(text) as unknown;
      return parsed && typeof parsed === "object" ? [{ ...parsed }] : [];
    } catch {
      return [];
    }
  });
}

/**
 * After `client.connect()` on a transport created with a stored `sessionId`
 * (which skips initialize, so the transport never opens its standalone GET
 * stream): opens that stream for the upstream's unsolicited messages. Returns
 * false when the SDK no longer has the private member (the session then
 * works without unsolicited messages; the caller logs it).
 */
export function openStandaloneStream(transport: StreamableHTTPClientTransport, onError: (err: unknown) => void): boolean {
  const open = (transport as unknown as Record<string, unknown>)._startOrAuthSse;
  if (typeof open !== "function") return false;
  (open as (options: { resumptionToken: undefined }) => Promise<void>).call(transport, { resumptionToken: undefined }).catch(onError);
  return true;
}
