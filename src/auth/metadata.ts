/**
 * OAuth 2.0 Protected Resource Metadata (RFC 9728) for every face:
 * GET /.well-known/oauth-protected-resource/<face path> describes that face
 * (`resource` = its externally visible URL), and the root form the gateway as
 * a whole (a token for the gateway's base URL is accepted on every face).
 * Public: it is what a client reads before it has a token.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { OAuthSettings } from "./authenticator.js";
import { externalBase, faceOfMetadataPath, resourceUrl, type ResourceUrlOptions } from "./resource-url.js";

export interface MetadataOptions {
  oauth: OAuthSettings;
  urls: ResourceUrlOptions;
  isFace(path: string): boolean;
}

/** The metadata document of the face at `facePath` ("" for the gateway). */
export function protectedResourceMetadata(req: IncomingMessage, o: MetadataOptions, facePath: string): Record<string, unknown> {
  return {
    resource: facePath === "" ? externalBase(req, o.urls) : resourceUrl(req, o.urls, facePath),
    authorization_servers: [...o.oauth.issuers],
    ...(o.oauth.scopes.length > 0 ? { scopes_supported: [...o.oauth.scopes] } : {}),
    bearer_methods_supported: ["header"],
    resource_name: "emceepee MCP gateway",
  };
}

/** Answers a PRM request (and returns true) when `path` is one; anything else is left alone. */
export function serveMetadata(req: IncomingMessage, res: ServerResponse, path: string, o: MetadataOptions): boolean {
  const face = faceOfMetadataPath(path, o.urls);
  if (face === undefined) return false;
  if (face !== "" && !o.isFace(face)) {
    send(res, 404, {
      error: "not_found",
      error_description: `no MCP endpoint at ${face}: metadata exists for the faces (/mcp, /all/mcp, /servers/<name>/mcp)`,
    });
    return true;
  }
  if (req.method !== "GET" && req.method !== "HEAD") {
    send(res, 405, { error: "method_not_allowed", error_description: "use GET" }, { Allow: "GET, HEAD" });
    return true;
  }
  send(res, 200, protectedResourceMetadata(req, o, face), {}, req.method === "HEAD");
  return true;
}

function send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}, head = false): void {
  res.writeHead(status, {
    "Content-Type": "application/json",
    // It names URLs taken from Host / X-Forwarded-* when no publicUrl is set.
    "Cache-Control": "no-store",
    ...headers,
  });
  res.end(head ? undefined : JSON.stringify(body));
}
