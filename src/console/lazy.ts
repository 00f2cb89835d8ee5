/**
 * The console as the gateway holds it (docs/adr/0045): ConsoleLive, which
 * counts from the start the session changes and server reconnections the
 * pages show, is made and started with the gateway; the pages (index.ts and
 * what it imports: routes, views, forms, login, the replicas' console API) are
 * loaded at the first request under /console, which waits for them. A
 * gateway whose console nobody opens never compiles them.
 */
import { errorMessage } from "../errors.js";
import { isConsolePath } from "../http/guards.js";
import type { PageHandler } from "../http/server.js";
import { sendText } from "./http.js";
import type { ConsoleOptions, WebConsole } from "./index.js";
import { ConsoleLive } from "./live.js";

export interface LazyConsole {
  /** For createHttpServer's `pages`: answers every path under /console (the first one loads the pages). */
  readonly handle: PageHandler;
  start(): void;
  /** Ends the live streams and their timers; pages still loading answer 503. */
  close(): void;
}

export function lazyConsole(options: ConsoleOptions): LazyConsole {
  const { context, peers } = options;
  const live = new ConsoleLive({
    sessions: context.sessions,
    clock: context.clock,
    keepAliveMs: context.settings.http.sseKeepAliveMs,
    // Read only while a console page is open, so after the pages loaded; RemoteConsole keeps no state.
    ...(peers ? { remoteVersions: async () => new (await import("./cluster.js")).RemoteConsole(peers, context.logger).versions() } : {}),
  });
  let pages: Promise<WebConsole> | undefined;
  let loaded: WebConsole | undefined;
  let closed = false;
  const load = (): Promise<WebConsole> =>
    (pages ??= import("./index.js").then(({ createConsole }) => {
      if (closed) throw new Error("the gateway is shutting down");
      return (loaded = createConsole({ ...options, live }));
    }));
  return {
    handle(req, res, path) {
      if (loaded) return loaded.handle(req, res, path);
      if (!isConsolePath(path)) return false;
      load().then(
        (web) => web.handle(req, res, path),
        (err: unknown) => {
          // A failed load is this request's answer (the next request tries again); shutting down is a 503, as for MCP requests.
          if (!closed) pages = undefined;
          context.logger.error({ err: errorMessage(err), path }, "console_request_failed");
          if (!res.headersSent) sendText(res, closed ? 503 : 500, `the console could not be loaded: ${errorMessage(err)}`);
        },
      );
      return true;
    },
    start: () => live.start(),
    close() {
      closed = true;
      loaded?.close();
      live.close();
    },
  };
}
