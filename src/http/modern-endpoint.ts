/**
 * The 2026-07-28 path of an MCP endpoint (docs/adr/0032-two-protocol-eras.md):
 * one stateless request answered by the endpoint's own face, built for an
 * ephemeral session over a linked in-memory 2025 transport pair, so that the
 * principal, governance and rate limits apply as on the sessionful path.
 */
import { randomUUID } from "node:crypto";
import { ServerResponse, type IncomingMessage } from "node:http";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import type { ClientCapabilities, Implementation, InitializeRequest, JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { principalOf, type Principal } from "../auth/principal.js";
import { ErrorCodes, GatewayError, toJsonRpcError } from "../errors.js";
import {
  CLIENT_CAPABILITIES_META_KEY,
  CLIENT_INFO_META_KEY,
  ENVELOPE_KEYS,
  LEGACY_VERSIONS,
  MODERN_VERSIONS,
  classifyModern,
  type LadderError,
  type ModernClassification,
} from "../mcp/modern/envelope.js";
import type { GatewayContext } from "../session/gateway-context.js";
import type { Session } from "../session/session.js";
import type { FaceRecord } from "../store/contracts.js";
import type { FaceServer } from "./face-server.js";
import {
  askableCapabilities,
  InputRequests,
  isMrtrMethod,
  parkedCallsOf,
  respondModernCall,
  sealerFor,
  modernResult,
  type ModernReply,
  type ParkedCallRouter,
} from "./modern-mrtr.js";
import { runAsModernCall } from "../upstream/modern/modern-call.js";
import { RequestStateSealer } from "../upstream/modern/sealed-state.js";
import { TASKS_EXTENSION } from "../mcp/modern/tasks-extension.js";
import { TASK_METHODS, answerModernTask, hostFor, taskHostSessionId } from "./modern-tasks.js";
import { listenRequestOf, serveListen, sseListenSink } from "./modern-subscriptions.js";

export interface ModernEndpointOptions {
  face(session: Session, init: InitializeRequest["params"]): FaceServer | Promise<FaceServer>;
  kind: FaceRecord;
  /** Replicas: a parked call's retry that reaches another replica is passed to the one that parked it. */
  router?: ParkedCallRouter | undefined;
}

export { TASKS_EXTENSION };

/** Methods of the 2025 era (or of its sessions) that a modern request may not use: -32601 at the edge. */
const REFUSED = new Set(["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "tasks/list", "tasks/result"]);
/** Methods served by forwarding to the face. */
const FORWARDED = new Set([
  "tools/list",
  "tools/call",
  "resources/list",
  "resources/templates/list",
  "resources/read",
  "prompts/list",
  "prompts/get",
  "completion/complete",
]);
/** The 2025 revision the faces are driven with on the in-memory pair. */
const INNER_VERSION = "2025-11-25";

/** Sends a JSON-RPC answer (without `jsonrpc`) to an HTTP response, or through a modern exchange (any transport). */
function send(res: ServerResponse | ModernExchange, status: number, payload: Record<string, unknown>): void {
  if (!(res instanceof ServerResponse)) return res.send(status, payload);
  if (res.headersSent) return void res.end();
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", ...payload }));
}

function sendError(res: ServerResponse | ModernExchange, id: string | number | null, error: LadderError): void {
  const { httpStatus, ...rest } = error;
  send(res, httpStatus, { id, error: rest });
}

function jsonRpcErrorOf(err: unknown, gateway: GatewayContext): { code: number; message: string; data?: unknown } {
  const { code, message, data } = toJsonRpcError(err, gateway.logger);
  return { code, message, ...(data !== undefined ? { data } : {}) };
}

function idOf(body: unknown): string | number | null {
  const id = (body as { id?: unknown } | null)?.id;
  return typeof id === "string" || typeof id === "number" ? id : null;
}

/**
 * What of a modern request goes on to the face: the caller's clientInfo from
 * the envelope, and `params` whose `_meta` keeps only what is not this hop's
 * envelope (progress tokens, W3C trace context) — absent when nothing is left.
 */
function faceRequestOf(params: Record<string, unknown>): { clientInfo: Implementation; params: Record<string, unknown> } {
  const meta = (params._meta ?? {}) as Record<string, unknown>;
  const clientInfo = (meta[CLIENT_INFO_META_KEY] ?? { name: "modern-client", version: "0" }) as Implementation;
  const inner = Object.fromEntries(Object.entries(meta).filter(([key]) => !(ENVELOPE_KEYS as readonly string[]).includes(key)));
  const { _meta: _envelope, ...rest } = params;
  return { clientInfo, params: Object.keys(inner).length > 0 ? { ...rest, _meta: inner } : rest };
}

/**
 * A face's 2025 capabilities as 2026-07-28 ones: task-augmented tools/call
 * becomes the tasks extension (modern-tasks.ts), as do the meta face's
 * promotions (`promotes`: modern-meta-tasks.ts).
 */
function modernCapabilities(capabilities: Record<string, unknown>, promotes: boolean): Record<string, unknown> {
  const { tasks, ...rest } = capabilities as { tasks?: { requests?: { tools?: { call?: unknown } } } } & Record<string, unknown>;
  if (tasks?.requests?.tools?.call === undefined && !promotes) return rest;
  return { ...rest, extensions: { ...(rest.extensions as Record<string, unknown> | undefined), [TASKS_EXTENSION]: {} } };
}

/** A parked call's retry whose replica is dead or cannot be reached (or that a replica passed on to a replica that is not its owner). */
function parkedOwnerGone(owner: string): GatewayError {
  return new GatewayError(
    ErrorCodes.BAD_REQUEST_STATE,
    `Invalid or expired requestState: the parked request it stands for was held by replica ${owner}, which has stopped or cannot be reached, and the call ended with it; call again without requestState`,
    { details: { reason: "parked_owner_gone", replica: owner } },
  );
}

/** A modern GET or DELETE: no streams and no sessions to end in this era. */
export function modernMethodNotAllowed(res: ServerResponse): void {
  res.setHeader("Allow", "POST");
  sendError(res, null, {
    httpStatus: 405,
    code: -32000,
    message:
      "Method not allowed: a 2026-07-28 request is a single POST (there is no GET stream or session to DELETE in this era; use subscriptions/listen, or drop the modern MCP-Protocol-Version header to use the 2025-11-25 session path)",
  });
}

export async function handleModern(
  gateway: GatewayContext,
  options: ModernEndpointOptions,
  req: IncomingMessage,
  res: ServerResponse,
  body: unknown,
): Promise<void> {
  const classified = classifyModern(req, body);
  if (classified.kind === "reject") return sendError(res, idOf(body), classified.error);
  if (classified.kind === "notification") {
    res.writeHead(202).end();
    return;
  }
  if (classified.method === "subscriptions/listen") return listen(gateway, options, classified, req, res);
  return answerModern(gateway, options, classified, {
    principal: principalOf(req),
    closed: new Promise<void>((resolve) => res.once("close", resolve)),
    send: (status, message) => send(res, status, message),
    toReplica: (owner) =>
      options.router && !options.router.fromReplica(req) ? options.router.toReplica(req, res, owner, JSON.stringify(body)) : Promise.resolve("gone"),
    toTaskHost: (sessionId) => (options.router ? options.router.toTaskHost(req, res, sessionId, JSON.stringify(body)) : Promise.resolve("local")),
  });
}

/** subscriptions/listen over HTTP: the response becomes a stream fed by the principal's host on this face (modern-subscriptions.ts). */
function listen(
  gateway: GatewayContext,
  options: ModernEndpointOptions,
  request: Extract<ModernClassification, { kind: "request" }>,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const principal = principalOf(req);
  const sink = sseListenSink(res);
  const router = options.router;
  if (router !== undefined) {
    // An open stream is the caller's activity on the face: each keep-alive also keeps this replica's hold on the
    // caller's task host, so a long task followed only here is not taken over by another replica as abandoned.
    const hostId = taskHostSessionId(options.kind, principal);
    const write = sink.keepAlive?.bind(sink);
    sink.keepAlive = () => {
      write?.();
      router.seen(hostId);
    };
  }
  return serveListen(gateway, options, listenRequestOf(request, principal), sink).catch((err: unknown) =>
    sendError(res, request.id, { httpStatus: 200, ...jsonRpcErrorOf(err, gateway) }),
  );
}

/** What the transport of one modern request gives answerModern: the caller, when it is gone, where the answer goes. */
export interface ModernExchange {
  /** The authenticated caller (HTTP inbound auth); none on stdio. */
  principal: Principal | undefined;
  /** Settles when the caller is gone (the HTTP request closed; stdin ended, or the request was cancelled): the call is dropped. */
  closed: Promise<void>;
  /** Sends the JSON-RPC answer (without `jsonrpc`); the status is HTTP's (a transport without one ignores it). */
  send(httpStatus: number, message: Record<string, unknown>): void;
  /** Replicas (HTTP only): passes a parked call's retry to the replica that holds it. */
  toReplica?(owner: string): Promise<"answered" | "gone">;
  /** Replicas (HTTP only): passes a task request to the replica that holds the caller's task host, or holds it here. */
  toTaskHost?(sessionId: string): Promise<"answered" | "local">;
}

/**
 * One 2026-07-28 request, classified, answered by the endpoint's face whatever
 * carried it: the HTTP endpoint (handleModern) or the stdio face (../server/stdio.ts).
 */
export async function answerModern(
  gateway: GatewayContext,
  options: ModernEndpointOptions,
  request: Extract<ModernClassification, { kind: "request" }>,
  exchange: ModernExchange,
): Promise<void> {
  const { id, method, params } = request;
  const meta = (params._meta ?? {}) as Record<string, unknown>;
  const capabilities = (meta[CLIENT_CAPABILITIES_META_KEY] ?? {}) as ClientCapabilities & { extensions?: Record<string, unknown> };
  if (REFUSED.has(method) || (!FORWARDED.has(method) && !TASK_METHODS.has(method) && method !== "server/discover")) {
    return sendError(exchange, id, {
      httpStatus: 404,
      code: -32601,
      message: `Method not found: ${method} is not served to 2026-07-28 requests${REFUSED.has(method) ? " (it belongs to the 2025-11-25 session path: drop the envelope and the modern header to use it)" : ""}`,
    });
  }
  if (params.task !== undefined) {
    if (capabilities.extensions?.[TASKS_EXTENSION] === undefined) {
      return sendError(exchange, id, {
        httpStatus: 400,
        code: -32021,
        message: `Missing required client capability: a task-augmented ${method} needs the ${TASKS_EXTENSION} extension declared in params._meta["${CLIENT_CAPABILITIES_META_KEY}"].extensions`,
        data: { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
      });
    }
    delete params.task; // a legacy client's hint: tolerated, the gateway decides which calls become tasks (SEP-2663)
  }
  // The tasks extension (modern-tasks.ts): the principal's task host answers, or the call goes on as a plain one.
  if (TASK_METHODS.has(method) && capabilities.extensions?.[TASKS_EXTENSION] === undefined) {
    return sendError(exchange, id, {
      httpStatus: 400,
      code: -32021,
      message: `Missing required client capability: ${method} needs the ${TASKS_EXTENSION} extension declared in params._meta["${CLIENT_CAPABILITIES_META_KEY}"].extensions`,
      data: { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
    });
  }
  const taskCall = method === "tools/call" && capabilities.extensions?.[TASKS_EXTENSION] !== undefined && params.requestState === undefined;
  let atHost = false; // this replica holds the caller's task host (asked once per request)
  if (TASK_METHODS.has(method) || taskCall) {
    try {
      // The caller's task host lives on one replica (its held inputRequests are there): the request goes there.
      if ((await exchange.toTaskHost?.(taskHostSessionId(options.kind, exchange.principal))) === "answered") return;
      atHost = true;
      const inner = faceRequestOf(params);
      const answer = await answerModernTask(gateway, options, exchange.principal, inner.clientInfo, method, inner.params, exchange.closed);
      if (answer === "gone") return; // the caller hung up: its call was cancelled
      if (answer !== undefined) return send(exchange, 200, { id, ...answer });
    } catch (err) {
      gateway.logger.warn({ err, method }, "modern_task_request_failed");
      return sendError(exchange, id, { httpStatus: 200, ...jsonRpcErrorOf(err, gateway) });
    }
  }
  if (options.kind.kind === "meta" && method === "tools/call") return answerMetaTool(gateway, options, request, exchange, atHost);
  let session: Session;
  // MRTR (modern-mrtr.ts): what the client may be asked mid-call comes back to it as input_required.
  const askable = askableCapabilities(capabilities);
  const mrtr = isMrtrMethod(method) && Object.keys(askable).length > 0;
  const { inputResponses, requestState, ...callParams } = params;
  const parkBinding = { face: JSON.stringify(options.kind), principal: exchange.principal?.hash, method, params: callParams };
  const reply: ModernReply = {
    result: (result) => send(exchange, 200, { id, result }),
    error: (error) => send(exchange, 200, { id, error }),
    failed: (err) => sendError(exchange, id, { httpStatus: 200, ...jsonRpcErrorOf(err, gateway) }),
  };
  if (isMrtrMethod(method) && typeof requestState === "string" && RequestStateSealer.kindOf(requestState) !== "upstream") {
    // Bridge 3: the retry of a parked call goes on with that call, on the replica that holds it.
    let resumed;
    try {
      const parked = parkedCallsOf(gateway).locate(requestState, parkBinding);
      const router = options.router;
      if (router && parked.owner !== undefined && parked.owner !== router.replica) {
        if ((await exchange.toReplica?.(parked.owner)) === "answered") return;
        throw parkedOwnerGone(parked.owner);
      }
      resumed = parkedCallsOf(gateway).resume(parked.handle);
    } catch (err) {
      return reply.failed(err);
    }
    const hint = { resultType: "complete", ttlMs: 0, cacheScope: exchange.principal !== undefined || options.kind.kind === "meta" ? "private" : "public" };
    resumed.flight.inputs.answer((inputResponses ?? {}) as Record<string, unknown>, resumed.flight.send);
    const closed = exchange.closed;
    return respondModernCall(
      gateway,
      resumed.flight,
      { binding: parkBinding, sessionId: resumed.sessionId, closed, hint, replica: options.router?.replica },
      reply,
    );
  }
  try {
    // Ephemeral: never persisted, no replay; asked mid-call only through MRTR (its askable capabilities).
    // Stateless: a session-mode server is reached through the principal's lingering connection (docs/adr/0058).
    session = gateway.sessions.create({ id: randomUUID(), downstreamCapabilities: askable, connect: false, principal: exchange.principal, stateless: true });
  } catch (err) {
    const own = err instanceof GatewayError && err.code === ErrorCodes.PRINCIPAL_LIMIT;
    return sendError(exchange, id, { httpStatus: own ? 429 : 503, ...jsonRpcErrorOf(err, gateway) });
  }
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  let server: FaceServer | undefined;
  const pending = new Map<string | number, (message: JSONRPCMessage) => void>();
  const inputs = mrtr ? new InputRequests() : undefined;
  clientSide.onmessage = (message) => {
    if ("id" in message && message.id !== undefined && ("result" in message || "error" in message)) return pending.get(message.id)?.(message);
    // A request from the face to the client (elicitation, sampling, roots): parked for MRTR, else the client cannot be asked.
    if (inputs && "id" in message && "method" in message) return inputs.add(message);
    if ("id" in message && "method" in message) {
      void clientSide.send({ jsonrpc: "2.0", id: message.id, error: { code: -32601, message: "the 2026-07-28 client cannot be asked mid-call" } });
    }
  };
  const ask = (requestId: string | number, m: string, p: Record<string, unknown>): Promise<JSONRPCMessage> =>
    new Promise((resolve) => {
      pending.set(requestId, resolve);
      void clientSide.send({ jsonrpc: "2.0", id: requestId, method: m, params: p });
    });
  const closed = exchange.closed;
  let handedOver = false;
  const dispose = async () => {
    pending.clear();
    await server?.close().catch(() => undefined);
    await clientSide.close().catch(() => undefined);
    await gateway.sessions.destroy(session.id, "modern request answered");
  };
  try {
    const inner = faceRequestOf(callParams);
    const init = { protocolVersion: INNER_VERSION, capabilities: askable, clientInfo: inner.clientInfo };
    server = await options.face(session, init);
    await server.connect(serverSide);
    await clientSide.start();
    const initialized = await ask("init", "initialize", init);
    if (!("result" in initialized)) throw new Error(`the face refused the synthetic initialize: ${JSON.stringify(initialized)}`);
    await clientSide.send({ jsonrpc: "2.0", method: "notifications/initialized" });
    const scope = exchange.principal !== undefined || options.kind.kind === "meta" ? "private" : "public";
    const hint = { resultType: "complete", ttlMs: 0, cacheScope: scope };
    if (method === "server/discover") {
      const result = initialized.result as { capabilities: Record<string, unknown>; serverInfo: Implementation; instructions?: string };
      return send(exchange, 200, {
        id,
        result: {
          supportedVersions: [...MODERN_VERSIONS, ...LEGACY_VERSIONS],
          capabilities: modernCapabilities(result.capabilities, options.kind.kind === "meta"),
          serverInfo: result.serverInfo,
          ...(result.instructions !== undefined ? { instructions: result.instructions } : {}),
          ...hint,
        },
      });
    }
    if (inputs) {
      // Bridge 1 under the face (upstream/modern/modern-call.ts); bridge 3 here: the flight is handed over, disposed or parked.
      const call = {
        method,
        principal: parkBinding.principal,
        capabilities: askable,
        sealer: sealerFor(gateway),
        inputResponses: inputResponses as Record<string, unknown> | undefined,
        requestState: typeof requestState === "string" ? requestState : undefined,
      };
      const flight = {
        answer: runAsModernCall(call, () => ask(id, method, inner.params)),
        inputs,
        send: (m: JSONRPCMessage) => void clientSide.send(m),
        dispose,
      };
      handedOver = true;
      return await respondModernCall(gateway, flight, { binding: parkBinding, sessionId: session.id, closed, hint, replica: options.router?.replica }, reply);
    }
    const answer = await Promise.race([ask(id, method, inner.params), closed.then(() => undefined)]);
    if (answer === undefined) return;
    if ("error" in answer) return send(exchange, 200, { id, error: answer.error });
    if ("result" in answer) return send(exchange, 200, { id, result: modernResult(answer.result, hint) });
  } catch (err) {
    gateway.logger.warn({ err, method }, "modern_request_failed");
    return sendError(exchange, id, { httpStatus: 200, ...jsonRpcErrorOf(err, gateway) });
  } finally {
    if (!handedOver) await dispose();
  }
}

/**
 * A meta tool called by a 2026-07-28 client (ADR 0032, "The meta face across
 * eras"): it runs in the principal's host session on the meta face rather than
 * in a session of its own, so what it leaves behind — a call promoted to a
 * task, an elicitation waiting in the queue, a timer, events — is there for the
 * same principal's later requests, and for no one else's. A caller that hangs
 * up cancels its call (the face's handler is aborted). With replicas the call
 * goes to the replica holding that host, as the principal's task requests do
 * (`atHost`: already asked for this request).
 */
async function answerMetaTool(
  gateway: GatewayContext,
  options: ModernEndpointOptions,
  { id, params }: Extract<ModernClassification, { kind: "request" }>,
  exchange: ModernExchange,
  atHost: boolean,
): Promise<void> {
  const {
    clientInfo,
    params: { inputResponses: _responses, requestState: _state, ...rest },
  } = faceRequestOf(params);
  try {
    if (!atHost && (await exchange.toTaskHost?.(taskHostSessionId(options.kind, exchange.principal))) === "answered") return;
    const host = await hostFor(gateway, options, exchange.principal, clientInfo);
    const answer = await host.requestUntil("tools/call", rest, exchange.closed);
    if (answer === undefined) return; // the caller hung up: its call was cancelled
    if ("error" in answer) return send(exchange, 200, { id, error: answer.error });
    return send(exchange, 200, { id, result: modernResult(answer.result, { resultType: "complete", ttlMs: 0, cacheScope: "private" }) });
  } catch (err) {
    const own = err instanceof GatewayError && err.code === ErrorCodes.PRINCIPAL_LIMIT;
    gateway.logger.warn({ err, method: "tools/call" }, "modern_request_failed");
    return sendError(exchange, id, { httpStatus: own ? 429 : 200, ...jsonRpcErrorOf(err, gateway) });
  }
}
