/**
 * The peer relays the benches compare with: supergateway@4 (stdio → Streamable
 * HTTP, `--stateful`), which starts a stdio server per session (emceepee's
 * session mode), and mcp-proxy@6 (stream endpoint), which starts one before it
 * listens and relays every session through it (emceepee's shared mode; one
 * `Client` made at start, docs/adr/0061). Installed on first use into
 * node_modules/.cache/emceepee-bench-peers (`npm install --prefix`, never
 * package.json), as bench/relay.bench.ts does.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { performance } from "node:perf_hooks";

export type Peer = "supergateway" | "mcp-proxy";

/** How many upstream processes each peer runs, for the benches' row labels (counted: docs/adr/0061). */
export const PEER_TOPOLOGY: Record<Peer, string> = { supergateway: "stdio per session", "mcp-proxy": "one stdio for all sessions" };

const PEERS_DIR = path.resolve("node_modules/.cache/emceepee-bench-peers");
const PEER_BINS: Record<Peer, string> = { supergateway: "supergateway/dist/index.js", "mcp-proxy": "mcp-proxy/dist/bin/mcp-proxy.mjs" };

/** The peer's entry point (node runs it), installed the first time it is asked for. */
export function peerBin(peer: Peer, log: (msg: string) => void): string {
  const bin = path.join(PEERS_DIR, "node_modules", PEER_BINS[peer]);
  if (!fs.existsSync(bin)) {
    log(`installing supergateway@4 and mcp-proxy@6 into ${PEERS_DIR}`);
    fs.mkdirSync(PEERS_DIR, { recursive: true });
    execFileSync("npm", ["install", "--prefix", PEERS_DIR, "--no-audit", "--no-fund", "--no-save", "supergateway@4", "mcp-proxy@6"], { stdio: "inherit" });
  }
  return bin;
}

/** The peer's arguments: Streamable HTTP at http://127.0.0.1:<port>/mcp in front of `server` (command and arguments) over stdio. */
export function peerArgs(peer: Peer, port: number, server: readonly string[]): string[] {
  return peer === "supergateway"
    ? [
        "--stdio",
        server.map((a) => JSON.stringify(a)).join(" "),
        "--outputTransport",
        "streamableHttp",
        "--stateful",
        "--port",
        String(port),
        "--logLevel",
        "none",
      ]
    : ["--port", String(port), "--host", "127.0.0.1", "--server", "stream", "--", ...server];
}

/**
 * `node <args>` (a peer relay, or another listener the benches compare with), resolved once it accepts a TCP
 * connection on `port`: neither peer prints a stable line at every log level.
 */
export async function startListening(label: string, args: readonly string[], port: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, args, { stdio: ["ignore", "ignore", "pipe"] });
  let err = "";
  child.stderr.on("data", (c: Buffer) => void (err = (err + c.toString()).slice(-4000)));
  const deadline = performance.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${label} exited ${child.exitCode}: ${err}`);
    const up = await new Promise<boolean>((resolve) => {
      const sock = net.connect(port, "127.0.0.1", () => (sock.destroy(), resolve(true)));
      sock.once("error", () => resolve(false));
    });
    if (up) return child;
    if (performance.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`${label} did not listen within 60 s: ${err}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
