/**
 * The fetch every remote upstream's transport uses (docs/adr/0015):
 * - an error answer (4xx, 5xx) reaches the SDK with its body cut to a short
 *   single-line excerpt, so no error, log line or `last_error` repeats what a
 *   non-MCP endpoint answered (the SDK quotes error bodies whole);
 * - for a server added at runtime (`runtime`), every request is checked
 *   against `gateway.servers.runtimeUrls` first, its connections resolve
 *   their host through the policy (`fetchFor`: the addresses connected to
 *   are the ones checked, DNS rebinding), and no redirect is followed: a 3xx
 *   is an error naming where it pointed.
 */
import { GatewayError, ErrorCodes } from "../errors.js";
import type { FetchLike } from "../mcp/sse-request-tap.js";
import type { RuntimeUrlPolicy } from "./url-policy.js";

/** Characters of an error body kept in the excerpt. */
export const BODY_EXCERPT_CHARS = 200;
/** Bytes read from an error body at most (the rest is discarded unread). */
const BODY_READ_BYTES = 4096;

export interface RemoteFetchOptions {
  server: string;
  /** Set for servers added at runtime: the URL rules, and redirects refused. */
  runtime?: RuntimeUrlPolicy | undefined;
  /** The fetch underneath; default: the policy's own (`runtime.fetchFor`) for a runtime server, else Node's. */
  base?: FetchLike;
}

export function remoteFetch(o: RemoteFetchOptions): FetchLike {
  const base: FetchLike = o.base ?? o.runtime?.fetchFor(o.server) ?? ((url, init) => fetch(url, init));
  return async (url, init) => {
    if (o.runtime) await o.runtime.check(url, o.server);
    const response = await base(url, o.runtime ? { ...init, redirect: "manual" } : init);
    if (o.runtime && response.status >= 300 && response.status < 400) {
      await response.body?.cancel().catch(() => undefined);
      throw redirectRefused(o.server, response, url);
    }
    if (response.status < 400 || !response.body) return response;
    const excerpt = await bodyExcerpt(response);
    return new Response(excerpt, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

/** At most BODY_EXCERPT_CHARS of a body on one line, marked when cut. */
export async function bodyExcerpt(response: Response): Promise<string> {
  const reader = response.body!.getReader() as ReadableStreamDefaultReader<Uint8Array>;
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  let more = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      bytes += value.byteLength;
      if (bytes >= BODY_READ_BYTES) {
        more = true;
        break;
      }
    }
  } catch {
    more = true;
  } finally {
    if (more) await reader.cancel().catch(() => undefined);
  }
  return excerptOf(new TextDecoder().decode(Buffer.concat(chunks)), more);
}

/** `text` on one line, cut to `max` characters with a marker (also when `cut` says there was more). */
export function excerptOf(text: string, cut = false, max = BODY_EXCERPT_CHARS): string {
  const line = text.replace(/\s+/g, " ").trim();
  if (line.length <= max && !cut) return line;
  return `${line.slice(0, max)}… (truncated)`;
}

function redirectRefused(server: string, response: Response, requested: string | URL): GatewayError {
  const location = response.headers.get("location");
  let target = "no Location";
  if (location !== null) {
    try {
      const u = new URL(location, requested);
      u.username = u.password = u.search = u.hash = "";
      target = excerptOf(u.href);
    } catch {
      target = excerptOf(location);
    }
  }
  return new GatewayError(
    ErrorCodes.UPSTREAM_UNAVAILABLE,
    `the server answered HTTP ${response.status}, a redirect to ${target}; redirects are not followed for servers added at runtime. add_server '${server}' with the final URL instead.`,
    { details: { server } },
  );
}
