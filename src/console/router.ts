/**
 * The console's routes as a table (method, path, handler, who may ask) and
 * the one dispatcher that serves it: a path in the table but not for this
 * method is 405 with an Allow header, a path not in it is the table's 404.
 * HEAD is served as GET. Paths are exact, with `:name` for one segment
 * (percent-decoded; malformed encoding reads as "") and a trailing `*` for
 * everything below a prefix.
 */
import type http from "node:http";

/**
 * Who may ask. `token`: the gateway's token (bearer or the login cookie),
 * which src/http/guards.ts demands before the console sees the request;
 * `none`: anyone (the login page, exempt there); `replica`: another replica
 * only (the cluster secret, checked by the handler: anyone else gets 404).
 */
export type Auth = "token" | "none" | "replica";

export interface ConsoleRequest {
  req: http.IncomingMessage;
  res: http.ServerResponse;
  path: string;
  /** The `:name` segments, decoded, by name. */
  params: Record<string, string>;
  query: URLSearchParams;
}

export interface Route {
  /** `*`: every method (the handler answers the ones it lacks). */
  method: "GET" | "POST" | "*";
  path: string;
  auth: Auth;
  handle(r: ConsoleRequest): void | Promise<void>;
}

interface Compiled extends Route {
  pattern: RegExp;
  names: string[];
}

export class Router {
  readonly #routes: Compiled[];

  constructor(
    routes: readonly Route[],
    private readonly notFound: (r: ConsoleRequest) => void | Promise<void>,
    private readonly notAllowed: (r: ConsoleRequest, allow: string) => void,
  ) {
    this.#routes = routes.map((route) => ({ ...route, ...compile(route.path) }));
  }

  get routes(): readonly Route[] {
    return this.#routes;
  }

  dispatch(req: http.IncomingMessage, res: http.ServerResponse, path: string): void | Promise<void> {
    const query = new URL(req.url ?? "/", "http://console.invalid").searchParams;
    const method = req.method === "HEAD" ? "GET" : (req.method ?? "");
    const allowed = new Set<string>();
    for (const route of this.#routes) {
      const m = route.pattern.exec(path);
      if (!m) continue;
      if (route.method === "*" || route.method === method) {
        const params = Object.fromEntries(route.names.map((name, i) => [name, decode(m[i + 1]!)]));
        return route.handle({ req, res, path, params, query });
      }
      allowed.add(route.method);
      if (route.method === "GET") allowed.add("HEAD");
    }
    const r = { req, res, path, params: {}, query };
    if (allowed.size === 0) return this.notFound(r);
    this.notAllowed(r, [...allowed].join(", "));
  }
}

function compile(path: string): { pattern: RegExp; names: string[] } {
  const names: string[] = [];
  const prefix = path.endsWith("*");
  const body = (prefix ? path.slice(0, -1) : path)
    .split("/")
    .map((segment) => {
      if (!segment.startsWith(":")) return segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
      names.push(segment.slice(1));
      return "([^/]+)";
    })
    .join("/");
  return { pattern: new RegExp(`^${body}${prefix ? ".*" : ""}$`), names };
}

function decode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return "";
  }
}
