/**
 * Helpers for the transparent-face integration tests: SDK clients ("peers")
 * that record every message their server sends them at the wire (so
 * progress and log notifications can be counted exactly, whatever the SDK's
 * own dispatch does with them), the same peer connected straight to
 * server-everything for side-by-side comparison, the MCP Inspector CLI as a
 * child process, and a fetch that drops an SSE stream on cue (Last-Event-ID
 * resumption).
 */
import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport, type StreamableHTTPClientTransportOptions } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ErrorCode,
  ListRootsRequestSchema,
  McpError,
  type CallToolResult,
  type ClientCapabilities,
  type CreateMessageRequest,
  type CreateMessageResult,
  type ElicitRequest,
  type ElicitResult,
  type JSONRPCMessage,
  type ProgressToken,
  type Root,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import { ROOT, everythingStdio, type TestGateway } from "./gateway.js";

/** What a fully capable client declares: form and URL elicitation, sampling. */
export const FULL_CAPABILITIES: ClientCapabilities = { elicitation: { form: {}, url: {} }, sampling: {} };

/** A JSON-RPC message as received, loosely typed for assertions. */
export type WireMessage = Record<string, any>;

export interface PeerOptions {
  name?: string;
  capabilities?: ClientCapabilities;
  /** Answers elicitation/create (only registered when the capabilities include elicitation). */
  elicit?: (params: ElicitRequest["params"]) => ElicitResult | Promise<ElicitResult>;
  /** Answers sampling/createMessage (only registered when the capabilities include sampling). */
  sample?: (params: CreateMessageRequest["params"]) => CreateMessageResult | Promise<CreateMessageResult>;
  /** Answers roots/list (only registered when the capabilities include roots). */
  roots?: () => Root[];
  /** Options for the Streamable HTTP transport (custom fetch, reconnection). */
  http?: StreamableHTTPClientTransportOptions;
}

/** An SDK client plus a wire-level record of everything its server sent it. */
export class Peer {
  readonly received: WireMessage[] = [];
  readonly elicitations: Array<ElicitRequest["params"]> = [];
  readonly samplings: Array<CreateMessageRequest["params"]> = [];
  rootsRequests = 0;
  private readonly waiters = new Set<() => void>();

  constructor(
    readonly client: Client,
    readonly transport: Transport,
  ) {}

  get sessionId(): string {
    const id = this.transport.sessionId;
    if (id === undefined) throw new Error("this peer has no session id");
    return id;
  }

  /** Every `taskId` value anywhere in what the server sent (results, notifications, requests' related-task _meta). */
  taskIdsSeen(): string[] {
    const ids: string[] = [];
    const walk = (v: unknown): void => {
      if (Array.isArray(v)) return v.forEach(walk);
      if (!v || typeof v !== "object") return;
      for (const [k, inner] of Object.entries(v)) {
        if (k === "taskId" && typeof inner === "string") ids.push(inner);
        else walk(inner);
      }
    };
    walk(this.received);
    return ids;
  }

  record(message: JSONRPCMessage): void {
    this.received.push(message);
    this.wake();
  }

  wake(): void {
    for (const check of [...this.waiters]) check();
  }

  /** Params of every notification `method` received so far. */
  notifications(method: string): WireMessage[] {
    return this.received.filter((m) => m.method === method && m.id === undefined).map((m) => (m.params ?? {}) as WireMessage);
  }

  /** Progress notifications carrying `token`. */
  progress(token: ProgressToken): WireMessage[] {
    return this.notifications("notifications/progress").filter((p) => p.progressToken === token);
  }

  /** The `data` of every notifications/message, as text. */
  logTexts(): string[] {
    return this.notifications("notifications/message").map((p) => (typeof p.data === "string" ? p.data : JSON.stringify(p.data)));
  }

  /** Resolves with the first non-undefined value of `probe`, re-checked on every message (never polls). */
  waitFor<T>(probe: () => T | undefined, what: string, timeoutMs = 30_000): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(check);
      };
      const check = () => {
        const value = probe();
        if (value === undefined) return;
        done();
        resolve(value);
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`timed out after ${timeoutMs}ms waiting for ${what}; received: ${JSON.stringify(this.received.slice(-10))}`));
      }, timeoutMs);
      this.waiters.add(check);
      check();
    });
  }

  /** Waits for a notifications/message whose data mentions `text`. */
  waitForLog(text: string): Promise<string> {
    return this.waitFor(() => this.logTexts().find((t) => t.includes(text)), `a log message mentioning ${text}`);
  }

  /** The JSON-RPC error object the server answered `request` with (undefined if it succeeded). */
  async errorOf(request: (client: Client) => Promise<unknown>): Promise<WireMessage | undefined> {
    const before = this.received.length;
    await request(this.client).catch(() => undefined);
    return this.received.slice(before).find((m) => m.error !== undefined)?.error;
  }

  /** tools/call, optionally with the client's own progress token in _meta. */
  async callTool(name: string, args: Record<string, unknown> = {}, progressToken?: ProgressToken): Promise<CallToolResult> {
    const params = { name, arguments: args, ...(progressToken !== undefined ? { _meta: { progressToken } } : {}) };
    return (await this.client.callTool(params, undefined, { timeout: 120_000 })) as CallToolResult;
  }

  async close(): Promise<void> {
    if (this.transport instanceof StreamableHTTPClientTransport) await this.transport.terminateSession().catch(() => undefined);
    // A direct server-everything does not exit when its stdin closes: the SDK's close waited 2 s for it, then sent
    // SIGTERM. It is the reference, not a subject: SIGTERM at once, after the SDK's close has begun listening for the exit.
    const pid = this.transport instanceof StdioClientTransport ? this.transport.pid : null;
    const closing = this.client.close().catch(() => undefined);
    if (pid !== null) {
      try {
        process.kill(pid, "SIGTERM");
      } catch {
        // gone already
      }
    }
    await closing;
  }
}

async function connectPeer(transport: Transport, options: PeerOptions): Promise<Peer> {
  const capabilities = options.capabilities ?? FULL_CAPABILITIES;
  const client = new Client({ name: options.name ?? "transparent-test", version: "1.0.0" }, { capabilities });
  const peer = new Peer(client, transport);
  if (capabilities.elicitation) {
    client.setRequestHandler(ElicitRequestSchema, (req) => {
      peer.elicitations.push(req.params);
      peer.wake();
      return options.elicit?.(req.params) ?? { action: "decline" };
    });
  }
  if (capabilities.sampling) {
    client.setRequestHandler(CreateMessageRequestSchema, (req) => {
      peer.samplings.push(req.params);
      peer.wake();
      if (!options.sample) throw new McpError(ErrorCode.InternalError, "this test client does not sample");
      return options.sample(req.params);
    });
  }
  if (capabilities.roots) {
    client.setRequestHandler(ListRootsRequestSchema, () => {
      peer.rootsRequests++;
      peer.wake();
      return { roots: options.roots?.() ?? [] };
    });
  }
  // Protocol.connect() calls a transport's existing onmessage before its own
  // dispatch: this tap sees every message, in wire order, synchronously.
  transport.onmessage = (message) => peer.record(message);
  try {
    await client.connect(transport);
  } catch (err) {
    await client.close().catch(() => undefined);
    throw err;
  }
  return peer;
}

/** A peer on a gateway endpoint over Streamable HTTP. */
export function connectFace(url: string, options: PeerOptions = {}): Promise<Peer> {
  return connectPeer(new StreamableHTTPClientTransport(new URL(url), options.http ?? {}), options);
}

/** The same peer connected straight to a fresh server-everything over stdio. */
export function connectDirect(options: PeerOptions = {}): Promise<Peer> {
  return connectPeer(new StdioClientTransport({ ...everythingStdio(), stderr: "ignore" }), { name: "direct", ...options });
}

/**
 * The capabilities the gateway's own client declared to `server` in the
 * peer's session. server-everything registers some tools only for clients
 * with certain capabilities, so a direct client must declare the same to be
 * comparable.
 */
export async function gatewayUpstreamCapabilities(gw: TestGateway, peer: Peer, server: string): Promise<ClientCapabilities> {
  const session = gw.gateway.context.sessions.get(peer.sessionId);
  if (!session) throw new Error(`the gateway has no session ${peer.sessionId}`);
  const declared = (await session.connection(server)).declaredCapabilities;
  if (!declared) throw new Error(`the gateway's connection to '${server}' declared no capabilities (not connected?)`);
  return declared;
}

/** A tool definition without `execution` (the gateway will rewrite execution.taskSupport). */
export function withoutExecution(tools: Tool[]): Array<Omit<Tool, "execution">> {
  return tools.map(({ execution: _execution, ...rest }) => rest);
}

/** How a request ended: its result, or the JSON-RPC error it failed with. */
export type Outcome<T> = { result: T } | { error: { code: number; message: string; data?: unknown } };

export async function outcome<T>(request: Promise<T>): Promise<Outcome<T>> {
  try {
    return { result: await request };
  } catch (err) {
    if (err instanceof McpError) return { error: { code: err.code, message: err.message, ...(err.data !== undefined ? { data: err.data } : {}) } };
    throw err;
  }
}

// ---------------------------------------------------------------------------
// MCP Inspector CLI

const INSPECTOR_BUILD = path.join(ROOT, "node_modules/@modelcontextprotocol/inspector-cli/build");

/**
 * Runs `mcp-inspector --cli <url> --transport http <args>` and parses the JSON
 * it prints. It reads its package.json relative to the cwd, hence the cwd.
 */
export async function inspector(url: string, args: string[]): Promise<any> {
  let stdout: string;
  try {
    ({ stdout } = await promisify(execFile)(process.execPath, ["cli.js", "--cli", url, "--transport", "http", ...args], {
      cwd: INSPECTOR_BUILD,
      timeout: 60_000,
    }));
  } catch (err) {
    const e = err as { message: string; stdout?: string; stderr?: string };
    throw new Error(`inspector-cli ${args.join(" ")} failed: ${e.message}\nstdout: ${e.stdout}\nstderr: ${e.stderr}`);
  }
  // Anything before the JSON (a deprecation banner) is skipped.
  const start = stdout.search(/^[{[]/m);
  if (start < 0) throw new Error(`inspector-cli printed no JSON: ${stdout}`);
  return JSON.parse(stdout.slice(start));
}

/** A fetch that holds the client's notifications/initialized for `ms` (a slow client or network). */
export function slowInitializedFetch(ms: number) {
  return async (url: string | URL, init?: RequestInit): Promise<Response> => {
    if (typeof init?.body === "string" && init.body.includes('"notifications/initialized"')) await new Promise((r) => setTimeout(r, ms));
    return fetch(url, init);
  };
}

// ---------------------------------------------------------------------------
// Streams that drop (Last-Event-ID resumption)

export type StreamKind = "post" | "get" | "resume";

export interface SseStreamLog {
  kind: StreamKind;
  /** The Last-Event-ID a resume asked for. */
  lastEventId?: string;
  events: Array<{ id?: string; message: WireMessage }>;
  /** Whether this stream was dropped on cue. */
  dropped: boolean;
}

/**
 * A fetch for StreamableHTTPClientTransport that logs every SSE stream it
 * carries and, once armed with dropAfter(), ends the next stream right after
 * the event that matches, as a network drop would (the HTTP connection is
 * torn down, so the server sees the client go away).
 */
export class DroppingFetch {
  readonly streams: SseStreamLog[] = [];
  private armed: ((message: WireMessage, kind: StreamKind) => boolean) | undefined;
  private held: { gate: Promise<void>; release: () => void } | undefined;

  dropAfter(match: (message: WireMessage, kind: StreamKind) => boolean): void {
    this.armed = match;
  }

  /** Keeps resumes (GETs with Last-Event-ID) waiting until releaseResumes(): the client stays away. */
  holdResumes(): void {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    this.held = { gate, release };
  }

  releaseResumes(): void {
    this.held?.release();
    this.held = undefined;
  }

  /** Which stream delivered the first message matching `match`. */
  streamOf(match: (message: WireMessage) => boolean): SseStreamLog | undefined {
    return this.streams.find((s) => s.events.some((e) => match(e.message)));
  }

  readonly fetch = async (url: string | URL, init?: RequestInit): Promise<Response> => {
    const lastEventId = new Headers(init?.headers).get("last-event-id") ?? undefined;
    const kind: StreamKind = init?.method === "POST" ? "post" : lastEventId ? "resume" : "get";
    if (kind === "resume") await this.held?.gate;
    const res = await fetch(url, init);
    if (!res.body || !String(res.headers.get("content-type")).includes("text/event-stream")) return res;
    const log: SseStreamLog = { kind, ...(lastEventId ? { lastEventId } : {}), events: [], dropped: false };
    this.streams.push(log);
    return new Response(this.relay(res.body, log), { status: res.status, statusText: res.statusText, headers: res.headers });
  };

  /** Passes SSE events through one at a time, ending the stream after the one that matches. */
  private relay(body: ReadableStream<Uint8Array>, log: SseStreamLog): ReadableStream<Uint8Array> {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    const encoder = new TextEncoder();
    let buffered = "";
    return new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        for (;;) {
          const end = buffered.indexOf("\n\n");
          if (end >= 0) {
            const raw = buffered.slice(0, end + 2);
            buffered = buffered.slice(end + 2);
            controller.enqueue(encoder.encode(raw));
            const event = parseSseEvent(raw);
            if (event) {
              log.events.push(event);
              if (this.armed?.(event.message, log.kind)) {
                this.armed = undefined;
                log.dropped = true;
                await reader.cancel().catch(() => undefined);
                controller.close();
              }
            }
            return;
          }
          const { value, done } = await reader.read();
          if (done) {
            if (buffered) controller.enqueue(encoder.encode(buffered));
            controller.close();
            return;
          }
          buffered += decoder.decode(value, { stream: true });
        }
      },
      cancel: (reason) => reader.cancel(reason),
    });
  }
}

function parseSseEvent(raw: string): { id?: string; message: WireMessage } | undefined {
  let id: string | undefined;
  const data: string[] = [];
  for (const line of raw.split(/\r?\n/)) {
    if (line.startsWith("id:")) id = line.slice(3).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).trim());
  }
  const text = data.join("\n");
  if (!text) return undefined;
  return { ...(id !== undefined ? { id } : {}), message: JSON.parse(text) as WireMessage };
}
