/**
 * WWW-Authenticate challenges of the MCP authorization spec (2025-11-25) and
 * RFC 6750 §3: every 401/403 names the face's Protected Resource Metadata
 * (`resource_metadata`, RFC 9728 §5.1) so a client can start discovery, and
 * the scopes it needs where that helps (`scope`).
 */
export type BearerError = "invalid_token" | "insufficient_scope" | "invalid_request";

export interface Challenge {
  resourceMetadata: string;
  scopes?: readonly string[] | undefined;
  error?: BearerError | undefined;
  description?: string | undefined;
}

export function bearerChallenge(c: Challenge): string {
  const params: string[] = [];
  if (c.error !== undefined) params.push(`error="${c.error}"`);
  if (c.description !== undefined) params.push(`error_description="${quotable(c.description)}"`);
  if (c.scopes !== undefined && c.scopes.length > 0) params.push(`scope="${c.scopes.join(" ")}"`);
  params.push(`resource_metadata="${quotable(c.resourceMetadata)}"`);
  return `Bearer ${params.join(", ")}`;
}

/** A quoted-string body without quotes, backslashes or control characters (RFC 6750 §3 limits error_description to these). */
function quotable(text: string): string {
  return text.replace(/[^\x20\x21\x23-\x5B\x5D-\x7E]/g, "'").slice(0, 300);
}
