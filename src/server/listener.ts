/** The gateway's HTTP listener as a part: listens once, and close() ends every open connection (idle keep-alives and SSE streams alike). */
import type http from "node:http";
import { listen } from "../http/server.js";

export class Listener {
  #server: http.Server | undefined;

  /** Listens on host:port; resolves with the MCP URL (IPv6 hosts in brackets) and the bound port. */
  async listen(server: http.Server, host: string, port: number): Promise<{ url: string; port: number }> {
    this.#server = server;
    const address = await listen(server, host, port);
    const shown = address.family === "IPv6" ? `[${address.address}]` : address.address;
    return { url: `http://${shown}:${address.port}/mcp`, port: address.port };
  }

  async close(): Promise<void> {
    const server = this.#server;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }
}
