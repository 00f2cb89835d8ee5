/**
 * The other replicas, as the web console sees them (docs/adr/0012, "Across
 * replicas"; docs/adr/0013): who is alive (Membership's replica set and
 * heartbeats) and a JSON request to one of them over the channel the cluster
 * forwards MCP requests on (Forwarder.call: its agents, its secret header).
 *
 * The target's HTTP guards run before it sees the secret, so a call also
 * carries what they ask of any request: the gateway's bearer token when one
 * is configured (replicas behind one balancer share it, as clients' requests
 * reach any of them), and for a POST an Origin of the target itself (the
 * console's CSRF check is for browsers; a replica proves itself with the
 * secret, which the receiving console checks).
 */
import type { IncomingMessage } from "node:http";
import { carriesSecret, type CallReply, type Forwarder } from "./forward.js";
import type { Membership } from "./membership.js";

/** A live replica: its incarnation and advertised URL. */
export interface PeerReplica {
  id: string;
  url: string;
}

export interface Peers {
  /** This replica's incarnation. */
  readonly self: string;
  /** The other live replicas, in a stable order. */
  others(): Promise<PeerReplica[]>;
  /** Whether `req` came from another replica (it carries the cluster secret). */
  fromPeer(req: IncomingMessage): boolean;
  /** A JSON request to `peer`; rejects (EMCP_UPSTREAM_UNAVAILABLE) when it does not answer in time. */
  call(peer: PeerReplica, method: "GET" | "POST", path: string, body?: unknown, headers?: Record<string, string>): Promise<CallReply>;
}

export interface PeersOptions {
  membership: Membership;
  forwarder: Forwarder;
  secret: string;
  /** gateway.token, sent as a bearer token when set. */
  token: string | undefined;
  /** gateway.http.maxBodyBytes: the largest reply accepted. */
  maxBytes: number;
}

/** How long one replica may take to answer a console read or action. */
export const PEER_TIMEOUT_MS = 3_000;

export function createPeers(o: PeersOptions): Peers {
  const self = o.membership.incarnation;
  return {
    self,
    async others() {
      return (await o.membership.liveReplicas()).filter((r) => r.id !== self);
    },
    fromPeer: (req) => carriesSecret(req, o.secret),
    call(peer, method, path, body, extra = {}) {
      const headers: Record<string, string> = { ...extra };
      if (o.token !== undefined) headers.authorization = `Bearer ${o.token}`;
      if (method === "POST") headers.origin = new URL(peer.url).origin;
      return o.forwarder.call(peer.url, { method, path, body, headers, timeoutMs: PEER_TIMEOUT_MS, maxBytes: o.maxBytes });
    },
  };
}
