/**
 * The embedded default used by `npm start` / `emceepee serve` without --config:
 * one upstream, the reference server-everything (a dependency), over stdio.
 */
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

export function everythingServerEntry(): string {
  return require.resolve("@modelcontextprotocol/server-everything/dist/index.js");
}

export function demoConfig(): Record<string, unknown> {
  return {
    mcpServers: {
      everything: { command: process.execPath, args: [everythingServerEntry(), "stdio"] },
    },
  };
}
