/**
 * The embedded default used by `npm start` / `emceepee serve` without --config:
 * one upstream, the reference server-everything, over stdio. It is an
 * optional dependency (express, jszip, cors with it): without it, the demo
 * config is an EMCP_CONFIG_INVALID that says what to install or to pass
 * --config, not a stack trace (docs/adr/0017-lazy-start.md).
 *
 * `"sharing": "session"` (the default, written out to be seen): server-everything
 * keeps state per connection (roots, subscriptions, simulated logging) and
 * its demo tools ask the client for input, which a shared stdio process can
 * only route while one session calls it (docs/adr/0010). The warm pool
 * (gateway.upstream.warmPool, 1) keeps a process ready for the next session.
 */
import { createRequire } from "node:module";
import { ErrorCodes, GatewayError } from "../error-codes.js";

export const EVERYTHING_PACKAGE = "@modelcontextprotocol/server-everything";

/** Resolves a module id as require.resolve does (tests pass another folder's). */
export type Resolve = (id: string) => string;

const resolveHere: Resolve = createRequire(import.meta.url).resolve;

/** The server-everything entry point, found from wherever emceepee is installed. */
export function everythingServerEntry(resolve: Resolve = resolveHere): string {
  try {
    return resolve(`${EVERYTHING_PACKAGE}/dist/index.js`);
  } catch (err) {
    if ((err as { code?: unknown }).code !== "MODULE_NOT_FOUND") throw err;
    throw new GatewayError(
      ErrorCodes.CONFIG_INVALID,
      `the embedded demo config runs ${EVERYTHING_PACKAGE}, which is not installed (it is an optional dependency); ` +
        `install it (npm install ${EVERYTHING_PACKAGE}) or pass your own config with --config <file> (docs/config.md)`,
      { cause: err },
    );
  }
}

export function demoConfig(resolve: Resolve = resolveHere): Record<string, unknown> {
  return {
    mcpServers: {
      everything: { command: process.execPath, args: [everythingServerEntry(resolve), "stdio"], sharing: "session" },
    },
  };
}
