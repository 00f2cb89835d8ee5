/**
 * The externally visible URL of this gateway and of each face (the OAuth
 * `resource`, RFC 8707/9728), in this order: `gateway.http.publicUrl`; else,
 * with `http.trustForwardedHeaders`, X-Forwarded-Proto / X-Forwarded-Host (a
 * host the Host guard allows); else http:// and the Host header when it names
 * the port the gateway listens on; else the listen address. Token audiences
 * are built on it, so a header never makes another resource's URL this one's.
 * Rules: docs/adr/0018-inbound-identity.md.
 */
import type { IncomingMessage } from "node:http";

export interface ResourceUrlOptions {
  publicUrl?: string | undefined;
  trustForwardedHeaders: boolean;
  /** The listen address ("127.0.0.1:8808"): its port is the one a Host header must name; the last resort. */
  listenAddress?: (() => string | undefined) | undefined;
  /** Whether a forwarded host is one of this gateway's names (the Host guard's rule); without it X-Forwarded-Host is not used. */
  hostAllowed?: ((host: string) => boolean) | undefined;
}

/** Where PRM documents live (RFC 9728 §3.1: inserted between the host and the resource's path). */
export const PRM_PREFIX = "/.well-known/oauth-protected-resource";

/** The gateway's base URL as clients see it: scheme, host and any path prefix, without a trailing slash. */
export function externalBase(req: IncomingMessage, o: ResourceUrlOptions): string {
  if (o.publicUrl !== undefined) return o.publicUrl.replace(/\/+$/, "");
  if (o.trustForwardedHeaders) {
    const proto = firstValue(req.headers["x-forwarded-proto"])?.toLowerCase();
    const host = firstValue(req.headers["x-forwarded-host"]);
    if ((proto === "http" || proto === "https") && host !== undefined && HOST.test(host) && o.hostAllowed?.(host) === true) {
      return `${proto}://${host.toLowerCase()}`;
    }
  }
  const listen = o.listenAddress?.();
  const host = req.headers.host;
  // Only a Host on the listening port: "localhost:4444" on a gateway at :8808 (which the loopback rule of the Host guard
  // lets through) would otherwise make tokens issued for another local resource, http://localhost:4444/mcp, valid here.
  if (host !== undefined && HOST.test(host) && listen !== undefined && portOf(host) === portOf(listen)) return `http://${host.toLowerCase()}`;
  return `http://${listen ?? "127.0.0.1"}`;
}

/** The port of host[:port] (80 when absent: the Host header of plain http://). */
function portOf(hostPort: string): string {
  return /:(\d{1,5})$/.exec(hostPort)?.[1] ?? "80";
}

/** The resource URL of the face at `facePath` ("/mcp"): the base and the path. */
export function resourceUrl(req: IncomingMessage, o: ResourceUrlOptions, facePath: string): string {
  return `${externalBase(req, o)}${facePath}`;
}

/** The PRM URL of the face at `facePath` ("" for the gateway as a whole). */
export function metadataUrl(req: IncomingMessage, o: ResourceUrlOptions, facePath: string): string {
  const base = new URL(`${externalBase(req, o)}/`);
  const prefix = base.pathname.replace(/\/+$/, "");
  return `${base.origin}${PRM_PREFIX}${prefix}${facePath}`;
}

/**
 * The face path a PRM request names ("" for the root form), or undefined when
 * `path` is not a PRM path. The base URL's path prefix may be there or not (a
 * proxy may strip it).
 */
export function faceOfMetadataPath(path: string, o: ResourceUrlOptions): string | undefined {
  if (path !== PRM_PREFIX && !path.startsWith(`${PRM_PREFIX}/`)) return undefined;
  let rest = path.slice(PRM_PREFIX.length);
  const prefix = o.publicUrl === undefined ? "" : new URL(`${o.publicUrl.replace(/\/+$/, "")}/`).pathname.replace(/\/+$/, "");
  if (prefix !== "" && (rest === prefix || rest.startsWith(`${prefix}/`))) rest = rest.slice(prefix.length);
  return rest === "/" ? "" : rest;
}

/** host[:port] (a name, IPv4 or [IPv6]): nothing a header could smuggle into a URL. */
const HOST = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$/;

function firstValue(header: string | string[] | undefined): string | undefined {
  const v = Array.isArray(header) ? header[0] : header;
  return v?.split(",")[0]?.trim() || undefined;
}
