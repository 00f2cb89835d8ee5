/**
 * Who is calling: a Principal is an issuer and a subject (the static token's
 * is "operator"), the scopes and claims its token carried, and a stable hash
 * that logs, metrics and traces use instead of the subject (never the token).
 * It rides on the request as the SDK's `req.auth` (AuthInfo), so MCP handlers
 * find it in `extra.authInfo`; the token itself is deliberately left out.
 */
import { createHash } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js";

export interface Principal {
  /** The token's `iss`, or STATIC_ISSUER for the static token. */
  readonly issuer: string;
  /** The token's `sub`; a token without one (client credentials, by introspection) is `client:<client_id>` (subjectOf). */
  readonly subject: string;
  readonly scopes: readonly string[];
  /** The validated token's claims (introspection: its answer), for later work (roles, audit). */
  readonly claims: Readonly<Record<string, unknown>>;
  /** OAuth client that obtained the token, when the token says. */
  readonly clientId?: string | undefined;
  /** When the token expires (epoch ms), when it says. */
  readonly expiresAt?: number | undefined;
  /** 16 hex digits of SHA-256(issuer, subject): stable across restarts and replicas, safe to log. */
  readonly hash: string;
}

/** The issuer the static token's principal is named under. */
export const STATIC_ISSUER = "urn:emceepee:static-token";

export function makePrincipal(p: Omit<Principal, "hash">): Principal {
  return Object.freeze({ ...p, scopes: Object.freeze([...p.scopes]), hash: principalHash(p.issuer, p.subject) });
}

/**
 * Where principals without a user live: a token without `sub` (RFC 7662 makes it
 * optional; a client-credentials token) is the subject `client:<client_id>`, and a
 * token whose own `sub` starts with `client:` is refused, so a client can never
 * be taken for a user whose subject is its id (docs/adr/0018-inbound-identity.md).
 */
export const CLIENT_SUBJECT_PREFIX = "client:";

/** The subject a token's claims name, or why none is accepted. */
export function subjectOf(claims: Readonly<Record<string, unknown>>): { subject: string } | { refused: string } {
  const { sub, client_id: clientId } = claims;
  if (typeof sub === "string" && sub !== "") {
    if (sub.startsWith(CLIENT_SUBJECT_PREFIX))
      return { refused: `its subject ${JSON.stringify(sub)} starts with "${CLIENT_SUBJECT_PREFIX}", which names OAuth clients without a user here` };
    return { subject: sub };
  }
  if (typeof clientId === "string" && clientId !== "") return { subject: `${CLIENT_SUBJECT_PREFIX}${clientId}` };
  return { refused: "it names no sub and no client_id" };
}

/** The one principal of the static token (the simple mode). */
export const OPERATOR: Principal = makePrincipal({ issuer: STATIC_ISSUER, subject: "operator", scopes: [], claims: {} });

export function principalHash(issuer: string, subject: string): string {
  return createHash("sha256").update(`${issuer}\0${subject}`).digest("hex").slice(0, 16);
}

/** Whether two principals are the same caller (issuer and subject). */
export function samePrincipal(a: Principal, b: Principal): boolean {
  return a.issuer === b.issuer && a.subject === b.subject;
}

/** Whether `caller` may use what `owner` created: the same principal, or anyone when nothing was owned (authentication off). */
export function mayUse(owner: Principal | undefined, caller: Principal | undefined): boolean {
  return owner === undefined || (caller !== undefined && samePrincipal(owner, caller));
}

type AuthedRequest = IncomingMessage & { auth?: AuthInfo };

/**
 * The bearer token each principal object came with, for upstreams whose operator opted into token passthrough only
 * (`auth: { type: "passthrough" }`, docs/adr/0027 §14). Outside the object, so it is never serialized, logged or stored.
 */
const inboundTokens = new WeakMap<object, string>();

/** The inbound bearer token `principal` came with (see inboundTokens); undefined when none was kept. */
export function inboundTokenOf(principal: object | undefined): string | undefined {
  return principal === undefined ? undefined : inboundTokens.get(principal);
}

/** A session's principal takes the token of a later request of the same person (a refreshed token replaces an expired one). */
export function refreshInboundToken(sessionPrincipal: Principal | undefined, caller: Principal | undefined): void {
  const token = inboundTokenOf(caller);
  if (sessionPrincipal && caller && token !== undefined && samePrincipal(sessionPrincipal, caller)) inboundTokens.set(sessionPrincipal, token);
}

/** Attaches `principal` to `req` where the SDK's Streamable HTTP transport reads it (`req.auth` → `extra.authInfo`); `token`: the bearer it came with. */
export function attachPrincipal(req: IncomingMessage, principal: Principal, token?: string): void {
  if (token !== undefined) inboundTokens.set(principal, token);
  (req as AuthedRequest).auth = {
    token: "", // not here: only an upstream with the operator's passthrough opt-in gets it (inboundTokenOf)
    clientId: principal.clientId ?? principal.subject,
    scopes: [...principal.scopes],
    ...(principal.expiresAt !== undefined ? { expiresAt: Math.floor(principal.expiresAt / 1000) } : {}),
    extra: { principal },
  };
}

/** The principal attached to a request, or found in an MCP handler's `extra.authInfo`. */
export function principalOf(from: IncomingMessage | AuthInfo | undefined): Principal | undefined {
  const info = from === undefined ? undefined : "headers" in from ? (from as AuthedRequest).auth : from;
  const p = info?.extra?.principal;
  return p !== null && typeof p === "object" && typeof (p as Principal).hash === "string" ? (p as Principal) : undefined;
}
