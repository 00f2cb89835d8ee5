/**
 * The embedded default used by `npm start` / `emceepee serve` without --config:
 * one upstream, the reference server-everything (a dependency), over stdio.
 *
 * `"sharing": "session"` (the default, written out to be seen): server-everything
 * keeps state per connection (roots, subscriptions, simulated logging) and
 * its demo tools ask the client for input, which a shared stdio process can
 * only route while one session calls it (docs/adr/0010). The warm pool
 * (gateway.upstream.warmPool, 1) keeps a process ready for the next session.
 */
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

export function everythingServerEntry(): string {
  return require.resolve("@modelcontextprotocol/server-everything/dist/index.js");
}

export function demoConfig(): Record<string, unknown> {
  return {
    mcpServers: {
      everything: { command: process.execPath, args: [everythingServerEntry(), "stdio"], sharing: "session" },
    },
  };
}
