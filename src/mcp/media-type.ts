/**
 * HTTP media types, read one way everywhere (RFC 9110 §8.3.1, §12.5.1): a
 * Content-Type's type without its parameters, case-insensitive; an Accept
 * header's ranges with their q-values and wildcards. Used for the
 * Streamable HTTP/SSE responses of upstreams and replicas, console forms and
 * the console's browser check.
 */

/** What an HTTP header's value may be (Node's IncomingHttpHeaders, fetch's Headers.get). */
type HeaderValue = string | readonly string[] | null | undefined;

/** `type/subtype` of a Content-Type value, lower-cased, without parameters; "" when absent. */
export function mediaType(contentType: HeaderValue): string {
  const value = typeof contentType === "string" ? contentType : (contentType?.[0] ?? "");
  return (value.split(";")[0] ?? "").trim().toLowerCase();
}

/** Whether a Content-Type value names `type` (e.g. "text/event-stream"), whatever its parameters and case. */
export function isMediaType(contentType: HeaderValue, type: string): boolean {
  return mediaType(contentType) === type.toLowerCase();
}

/** One range of an Accept header. */
export interface MediaRange {
  /** `type/subtype`, lower-cased; either part may be `*`. */
  range: string;
  /** 0…1 (@default 1) */
  q: number;
}

/** The ranges of an Accept header (several headers are joined); malformed ranges are skipped. */
export function parseAccept(accept: HeaderValue): MediaRange[] {
  const value = typeof accept === "string" ? accept : (accept ?? []).join(",");
  const ranges: MediaRange[] = [];
  for (const part of value.split(",")) {
    const [head = "", ...params] = part.split(";");
    const range = head.trim().toLowerCase();
    if (!/^[^/\s]+\/[^/\s]+$/.test(range)) continue;
    let q = 1;
    for (const param of params) {
      const [name = "", raw = ""] = param.split("=");
      if (name.trim().toLowerCase() !== "q") continue;
      const n = Number(raw.trim());
      q = Number.isFinite(n) && raw.trim() !== "" ? Math.min(1, Math.max(0, n)) : 1;
    }
    ranges.push({ range, q });
  }
  return ranges;
}

/** How specifically `range` matches `type`: 3 exact, 2 `type/*`, 1 `*\/*`, 0 not at all. */
function specificity(range: string, type: string): number {
  if (range === type) return 3;
  if (range === "*/*") return 1;
  return range.endsWith("/*") && type.startsWith(range.slice(0, -1)) ? 2 : 0;
}

export interface AcceptOptions {
  /** Whether `*\/*` and `type/*` count. False: only a range naming `type` itself does (what a browser's navigation sends). @default true */
  wildcards?: boolean;
}

/**
 * Whether an Accept header takes `type`: the most specific range that
 * matches it has q > 0 (so `text/html;q=0, *\/*` refuses text/html). An
 * absent or empty header takes anything (RFC 9110 §12.5.1), unless
 * wildcards are off.
 */
export function accepts(accept: HeaderValue, type: string, options: AcceptOptions = {}): boolean {
  const wildcards = options.wildcards ?? true;
  const want = type.toLowerCase();
  const ranges = parseAccept(accept);
  if (!ranges.length) return wildcards;
  let best = 0;
  let q = 0;
  for (const r of ranges) {
    const s = specificity(r.range, want);
    if (s === 0 || (!wildcards && s < 3)) continue;
    if (s > best) [best, q] = [s, r.q];
    else if (s === best) q = Math.max(q, r.q);
  }
  return best > 0 && q > 0;
}
