/**
 * MRTR for 2026-07-28 clients at the modern endpoint (ADR 0032, "MRTR
 * bridges"). Bridge 3: what a face asks the client mid-call (a legacy
 * upstream's elicitation, sampling or roots request) is parked with the call,
 * which stays open upstream, and the client is answered at once with
 * `input_required` whose requestState is a sealed handle; its retry answers
 * the parked requests and the call goes on, for as many rounds as it asks.
 * A parked call that gets no retry within gateway.mrtr.parkTtlMs is
 * cancelled. Bridge 1's relay lives under the face (upstream/modern/); here
 * only its result is shown and the seal's key is chosen.
 */
import { randomBytes } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { JSONRPCMessage, JSONRPCRequest } from "@modelcontextprotocol/sdk/types.js";
import type { TimerHandle } from "../clock.js";
import { ErrorCodes, GatewayError } from "../errors.js";
import type { GatewayContext } from "../session/gateway-context.js";
import { loadKeys } from "../upstream/auth/keyring.js";
import { RequestStateSealer, type StateBinding } from "../upstream/modern/sealed-state.js";
import { MRTR_METHODS } from "../upstream/modern/wire.js";

/** Client capabilities a server may ask for in `inputRequests`. */
const ASKABLE = ["elicitation", "sampling", "roots"] as const;

/** The part of a modern client's declared capabilities that lets it be asked for input (empty: it cannot be). */
export function askableCapabilities(declared: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(ASKABLE.filter((k) => declared[k] !== undefined && declared[k] !== null).map((k) => [k, declared[k]]));
}

/** Whether `method` may answer `input_required` (SEP-2322). */
export function isMrtrMethod(method: string): boolean {
  return MRTR_METHODS.has(method);
}

const sealers = new WeakMap<GatewayContext, RequestStateSealer>();

/**
 * The gateway's requestState sealer. Its key is derived from a secret every
 * replica with the same config shares: the vault's current key, else
 * cluster.secret; with neither, a random one (this process only: a restart or
 * another replica cannot open what it sealed). Single use is marked in the
 * gateway's store (shared by the replicas).
 */
export function sealerFor(gateway: GatewayContext): RequestStateSealer {
  let sealer = sealers.get(gateway);
  if (!sealer) {
    const { settings } = gateway;
    const secret =
      loadKeys(settings.vault)?.[0]?.key ?? (settings.cluster.secret !== undefined ? Buffer.from(settings.cluster.secret, "utf8") : randomBytes(32));
    sealer = new RequestStateSealer(secret, { ttlMs: settings.mrtr.stateTtlMs, clock: gateway.clock, used: gateway.store.singleUse });
    sealers.set(gateway, sealer);
  }
  return sealer;
}

/** A modern result as the client gets it: bridge 1's relayed `input_required` without the placeholders, else complete with `hint`. */
export function modernResult(result: Record<string, unknown>, hint: Record<string, unknown>): Record<string, unknown> {
  if (result.resultType !== "input_required") return { ...result, ...hint };
  const { inputRequests, requestState, _meta } = result;
  return {
    resultType: "input_required",
    ...(inputRequests !== undefined ? { inputRequests } : {}),
    ...(requestState !== undefined ? { requestState } : {}),
    ...(_meta !== undefined ? { _meta } : {}),
  };
}

/**
 * The server→client requests a face sent during one modern call, waiting for
 * the client's answers: each under a key unique in the call, asked again in
 * the next `input_required` until answered.
 */
export class InputRequests {
  private readonly waiting = new Map<string, JSONRPCRequest>();
  private next = 0;
  private wake: (() => void) | undefined;

  add(request: JSONRPCRequest): void {
    this.waiting.set(`${request.method.replace(/\W+/g, "_")}_${++this.next}`, request);
    this.wake?.();
  }

  get size(): number {
    return this.waiting.size;
  }

  /** The `inputRequests` of the answer. */
  asked(): Record<string, { method: string; params?: Record<string, unknown> }> {
    return Object.fromEntries([...this.waiting].map(([key, r]) => [key, { method: r.method, ...(r.params !== undefined ? { params: r.params } : {}) }]));
  }

  /** Sends the face the client's answers for the keys it answered (others stay waiting); returns how many were answered. */
  answer(responses: Record<string, unknown>, send: (message: JSONRPCMessage) => void): number {
    let answered = 0;
    for (const [key, result] of Object.entries(responses)) {
      const request = this.waiting.get(key);
      if (!request || typeof result !== "object" || result === null) continue;
      this.waiting.delete(key);
      answered++;
      send({ jsonrpc: "2.0", id: request.id, result: result as Record<string, unknown> });
    }
    return answered;
  }

  /** Resolves once a request waits. */
  whenAsked(): Promise<void> {
    if (this.waiting.size > 0) return Promise.resolve();
    return new Promise((resolve) => {
      this.wake = () => {
        this.wake = undefined;
        resolve();
      };
    });
  }
}

/** One modern call in flight: its face's answer to come, what it asks meanwhile, and how to end it all. */
export interface ModernFlight {
  answer: Promise<JSONRPCMessage>;
  inputs: InputRequests;
  /** Sends the face a message (an answer to one of its requests). */
  send: (message: JSONRPCMessage) => void;
  /** Closes the face, the in-memory pair and the ephemeral session (cancelling the upstream call if it still runs). */
  dispose(): Promise<void>;
}

/**
 * Replicas (ADR 0032, "MRTR bridges" §5): a parked call lives in the replica
 * that parked it, so its handle names that replica and a retry that reaches
 * another one is passed there; a caller's task host is held by one replica
 * too (toTaskHost). Implemented by the cluster's router; absent for a single
 * gateway.
 */
export interface ParkedCallRouter {
  /** This replica's incarnation (sealed into the handles it issues). */
  readonly replica: string;
  /** Whether `req` was forwarded by another replica (it is never forwarded again). */
  fromReplica(req: IncomingMessage): boolean;
  /** Passes the request to the live replica `owner` and pipes its answer back; "gone" (nothing sent to the client) when it is dead or unreachable. */
  toReplica(req: IncomingMessage, res: ServerResponse, owner: string, body: string): Promise<"answered" | "gone">;
  /**
   * A task request (ADR 0032, "Tasks across eras"): passed to the live replica
   * that holds task host session `sessionId` ("answered"), or that host is held
   * here from now on ("local"; taken over at once from a replica that is gone,
   * the calls that ran there failed). A request another replica passed on is
   * served here ("local").
   */
  toTaskHost(req: IncomingMessage, res: ServerResponse, sessionId: string, body: string): Promise<"answered" | "local">;
  /** A request of a session held here arrived, or a stream of it is still open (keeps its owner record fresh). */
  seen(sessionId: string): void;
}

/** How a handle's owner names a gateway process that runs without replicas (not a replica's incarnation: `gateway.cluster.replicaId` plus a suffix). */
const UNCLUSTERED = "gateway-process-";

/** A parked call's handle as sealed: the registry key and the replica (with replicas) or gateway process that holds it. */
function handleText(handle: string, replica: string | undefined): string {
  return replica === undefined ? handle : `${handle}.${replica}`;
}

/** What a client's parked handle names (the registry key is base64url, so the first "." ends it). */
export interface ParkedHandle {
  handle: string;
  /** The replica that parked the call (undefined: a single gateway). */
  owner: string | undefined;
}

/** What a modern call request's HTTP answer is. */
export type FlightOutcome = { kind: "answer"; message: JSONRPCMessage } | { kind: "input"; result: Record<string, unknown> } | { kind: "gone" };

/** What a parked call's handle is bound to: the face (it names the upstream), the caller, the method, the arguments. */
export interface ParkBinding {
  face: string;
  principal: string | undefined;
  method: string;
  params: Record<string, unknown>;
}

interface Parked {
  flight: ModernFlight;
  sessionId: string;
  timer: TimerHandle;
}

/**
 * The calls of this replica parked for a retry (bridge 3). A handle is used
 * once: the retry takes the call out; a later answer parks it again under a
 * new handle.
 */
export class ParkedCalls {
  private readonly parked = new Map<string, Parked>();
  /** Names this gateway process in the handles it issues without replicas, so a retry that reaches another process says why it is refused. */
  private readonly self = `${UNCLUSTERED}${randomBytes(6).toString("hex")}`;
  private readonly unobserve: () => void;

  constructor(private readonly gateway: GatewayContext) {
    // A parked call's session ended (gateway shutdown): its timer and entry go with it.
    this.unobserve = gateway.sessions.observe((change) => {
      if (change.type !== "session_ended") return;
      for (const [handle, p] of this.parked) if (p.sessionId === change.sessionId) this.drop(handle);
    });
  }

  /**
   * Waits for the call's answer or for what it asks the client; then answers
   * with the result, or parks the call and answers `input_required`. "gone":
   * the client's HTTP request closed first (the caller disposes the flight).
   */
  async drive(flight: ModernFlight, binding: ParkBinding, sessionId: string, closed: Promise<void>, replica?: string): Promise<FlightOutcome> {
    const asked = flight.inputs.whenAsked().then(() => "asked" as const);
    const first = await Promise.race([flight.answer.then((message) => ({ message })), asked, closed.then(() => "gone" as const)]);
    if (first === "gone") return { kind: "gone" };
    if (first !== "asked") return { kind: "answer", message: first.message };
    return { kind: "input", result: this.park(flight, binding, sessionId, replica) };
  }

  /**
   * Opens a retry's parked handle, bound to the same face, caller, method
   * and arguments: which call it names and which replica parked it. Throws
   * EMCP_BAD_REQUEST_STATE when refused.
   */
  locate(requestState: string, binding: ParkBinding): ParkedHandle {
    const text = sealerFor(this.gateway).open(requestState, asStateBinding(binding)) ?? "";
    const dot = text.indexOf(".");
    const owner = dot < 0 ? undefined : text.slice(dot + 1);
    if (owner?.startsWith(UNCLUSTERED) && owner !== this.self) {
      throw new GatewayError(
        ErrorCodes.BAD_REQUEST_STATE,
        "Invalid or expired requestState: the parked request it stands for is gone from here: another gateway process parked it (this gateway restarted since, or the retry reached another gateway sharing this endpoint); gateways that serve one endpoint together must run as replicas with gateway.cluster on (docs/adr/0013), which pass a retry to the one that parked its call; call again without requestState",
        { details: { reason: "parked_elsewhere" } },
      );
    }
    return { handle: dot < 0 ? text : text.slice(0, dot), owner: owner === this.self ? undefined : owner };
  }

  /**
   * A retry of a call parked here (see locate()): takes it out of the
   * registry to be answered and driven on. Throws EMCP_BAD_REQUEST_STATE
   * when it is gone.
   */
  resume(handle: string): { flight: ModernFlight; sessionId: string } {
    const parked = this.parked.get(handle);
    if (!parked) {
      throw new GatewayError(
        ErrorCodes.BAD_REQUEST_STATE,
        "Invalid or expired requestState: the parked request it stands for is gone (answered already, not retried within gateway.mrtr.parkTtlMs so the call was cancelled, or parked on a gateway that restarted); call again without requestState",
        { details: { reason: "parked_request_gone" } },
      );
    }
    this.parked.delete(handle);
    this.gateway.clock.clearTimeout(parked.timer);
    return { flight: parked.flight, sessionId: parked.sessionId };
  }

  private park(flight: ModernFlight, binding: ParkBinding, sessionId: string, replica: string | undefined): Record<string, unknown> {
    const { maxParked, parkTtlMs } = this.gateway.settings.mrtr;
    if (this.parked.size >= maxParked) {
      throw new GatewayError(
        ErrorCodes.LIMIT_REACHED,
        `${maxParked} calls already wait for their clients' input on this replica (gateway.mrtr.maxParked); this call was cancelled, retry it later`,
      );
    }
    const handle = randomBytes(16).toString("base64url");
    const timer = this.gateway.clock.setTimeout(() => {
      if (!this.parked.has(handle)) return;
      this.parked.delete(handle);
      this.gateway.logger.info({ method: binding.method, ttlMs: parkTtlMs }, "mrtr_parked_call_expired");
      void flight.dispose();
    }, parkTtlMs);
    this.parked.set(handle, { flight, sessionId, timer });
    const requestState = sealerFor(this.gateway).seal(asStateBinding(binding), handleText(handle, replica ?? this.self), "parked");
    return { resultType: "input_required", inputRequests: flight.inputs.asked(), requestState };
  }

  private drop(handle: string): void {
    const parked = this.parked.get(handle);
    if (!parked) return;
    this.parked.delete(handle);
    this.gateway.clock.clearTimeout(parked.timer);
  }

  /** Parked calls now (for tests and metrics). */
  get size(): number {
    return this.parked.size;
  }

  close(): void {
    this.unobserve();
    for (const handle of [...this.parked.keys()]) this.drop(handle);
  }
}

function asStateBinding(b: ParkBinding): StateBinding {
  return { upstream: `face:${b.face}`, principal: b.principal, method: b.method, params: b.params };
}

const registries = new WeakMap<GatewayContext, ParkedCalls>();

/** The gateway's parked calls (made on first use). */
export function parkedCallsOf(gateway: GatewayContext): ParkedCalls {
  let calls = registries.get(gateway);
  if (!calls) registries.set(gateway, (calls = new ParkedCalls(gateway)));
  return calls;
}

/** How respondModernCall() answers the client's HTTP request. */
export interface ModernReply {
  result(result: Record<string, unknown>): void;
  error(error: unknown): void;
  /** An error the gateway raised (a GatewayError or a bug). */
  failed(err: unknown): void;
}

/**
 * Answers one modern MRTR call request (the first or a retry): the call's
 * result, or `input_required` with the call parked. Disposes the flight
 * unless it was parked.
 */
export async function respondModernCall(
  gateway: GatewayContext,
  flight: ModernFlight,
  at: { binding: ParkBinding; sessionId: string; closed: Promise<void>; hint: Record<string, unknown>; replica?: string | undefined },
  reply: ModernReply,
): Promise<void> {
  let parked = false;
  try {
    const outcome = await parkedCallsOf(gateway).drive(flight, at.binding, at.sessionId, at.closed, at.replica);
    if (outcome.kind === "gone") return;
    if (outcome.kind === "input") {
      parked = true;
      return reply.result(outcome.result);
    }
    const answer = outcome.message;
    if ("error" in answer) return reply.error(answer.error);
    if ("result" in answer) return reply.result(modernResult(answer.result, at.hint));
  } catch (err) {
    reply.failed(err);
  } finally {
    if (!parked) await flight.dispose();
  }
}
