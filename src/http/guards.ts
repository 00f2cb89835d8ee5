/**
 * HTTP guards applied before any MCP handling: Host and Origin validation
 * (DNS-rebinding protection) and the optional bearer token, compared in
 * constant time. isLoopbackHost() tells the CLI when a bind address reaches
 * beyond this machine.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";

const LOOPBACK_HOSTS = new Set(["localhost", "127.0.0.1", "[::1]"]);

export interface GuardOptions {
  allowedHosts: readonly string[];
  allowedOrigins: readonly string[];
  token?: string | undefined;
}

export type GuardFailure = { status: 401 | 403; message: string; headers?: Record<string, string> };

export function checkRequest(req: IncomingMessage, o: GuardOptions): GuardFailure | undefined {
  const host = req.headers.host;
  if (!host || !hostAllowed(host, o.allowedHosts)) {
    return { status: 403, message: `Host '${host ?? ""}' is not allowed; add it to gateway.allowedHosts (or --allowed-hosts) to accept it` };
  }
  const origin = req.headers.origin;
  if (origin !== undefined && !originAllowed(origin, o.allowedOrigins)) {
    return { status: 403, message: `Origin '${origin}' is not allowed; add it to gateway.allowedOrigins (or --allowed-origins) to accept it` };
  }
  if (o.token !== undefined && !tokenMatches(req.headers.authorization, o.token)) {
    return {
      status: 401,
      message: "missing or wrong bearer token (send Authorization: Bearer <token>)",
      headers: { "WWW-Authenticate": 'Bearer realm="emceepee"' },
    };
  }
  return undefined;
}

/** Whether binding `host` keeps the gateway on this machine (127.0.0.0/8, ::1, localhost). */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[(.*)\]$/, "$1");
  return h === "localhost" || h === "::1" || /^127(\.\d{1,3}){3}$/.test(h) || /^::ffff:127(\.\d{1,3}){3}$/.test(h);
}

function hostname(hostHeader: string): string {
  if (hostHeader.startsWith("[")) return hostHeader.slice(0, hostHeader.indexOf("]") + 1).toLowerCase();
  return (hostHeader.split(":")[0] ?? "").toLowerCase();
}

function hostAllowed(hostHeader: string, allowed: readonly string[]): boolean {
  const name = hostname(hostHeader);
  return LOOPBACK_HOSTS.has(name) || allowed.some((a) => a.toLowerCase() === name || a.toLowerCase() === hostHeader.toLowerCase());
}

function originAllowed(origin: string, allowed: readonly string[]): boolean {
  if (allowed.includes(origin)) return true;
  try {
    const u = new URL(origin);
    return (u.protocol === "http:" || u.protocol === "https:") && LOOPBACK_HOSTS.has(u.hostname.toLowerCase());
  } catch {
    return false;
  }
}

function tokenMatches(header: string | undefined, token: string): boolean {
  const m = /^Bearer\s+(.+)$/i.exec(header ?? "");
  if (!m) return false;
  const a = createHash("sha256").update(m[1]!.trim()).digest();
  const b = createHash("sha256").update(token).digest();
  return timingSafeEqual(a, b);
}
