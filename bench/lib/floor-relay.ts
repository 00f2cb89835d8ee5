/**
 * The floor of `bench:relay` (issue 27): the smallest correct JSON-RPC relay a
 * person would write in Node, run as its own process so its CPU per call is
 * the honest lower bound for "a relay in Node" on the same machine and in the
 * same rounds. A bench peer, not product code.
 *
 * `node --import tsx bench/lib/floor-relay.ts <port> [--per-session] <command> [args…]`:
 * node:http on 127.0.0.1:<port>/mcp in front of one stdio server (`command`),
 * initialized once at start — or, with `--per-session`, one stdio server per
 * session, started and initialized at the session's `initialize` (the topology
 * of emceepee's session mode and supergateway). Per POST: read and parse the
 * body; `initialize` is answered from the server's own answer (a new session
 * id); a notification gets 202; a request gets its id rewritten to a counter,
 * one line written to the server's stdin, and the answer, read off its stdout
 * (line splitting) and mapped back to the client's id, is the JSON body. GET is
 * 405 (no listen stream), DELETE ends the session (and its server). No
 * batching, SSE, resumption, cancel or progress: what the bench's client does
 * not ask for is left out.
 */
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import http from "node:http";

const argv = process.argv.slice(2);
const perSession = argv.includes("--per-session");
const [portArg, command, ...args] = argv.filter((a) => a !== "--per-session");
if (!portArg || !command) throw new Error("usage: floor-relay.ts <port> [--per-session] <command> [args…]");

interface Message {
  jsonrpc: "2.0";
  id?: string | number;
  method?: string;
  result?: unknown;
  error?: unknown;
}

/** One stdio server: its requests in flight by the counter's id. */
class Upstream {
  readonly #child: ChildProcessWithoutNullStreams;
  readonly #waiting = new Map<number, (msg: Message) => void>();
  #nextId = 0;
  #tail = "";
  #closing = false;

  constructor() {
    this.#child = spawn(command!, args, { stdio: ["pipe", "pipe", "inherit"] }) as unknown as ChildProcessWithoutNullStreams;
    this.#child.once("exit", (code) => {
      if (this.#closing) return;
      process.stderr.write(`floor-relay: upstream exited ${code}\n`);
      process.exit(1);
    });
    this.#child.stdout.setEncoding("utf8");
    this.#child.stdout.on("data", (chunk: string) => {
      const lines = (this.#tail + chunk).split("\n");
      this.#tail = lines.pop()!;
      for (const line of lines) {
        if (!line) continue;
        const msg = JSON.parse(line) as Message;
        if (typeof msg.id !== "number" || msg.method !== undefined) continue; // the upstream's notifications and requests: not needed here
        const answer = this.#waiting.get(msg.id);
        if (!answer) continue;
        this.#waiting.delete(msg.id);
        answer(msg);
      }
    });
  }

  /** Writes one request to the upstream; `answer` gets its response, id already the counter's. */
  forward(msg: Message, answer: (msg: Message) => void): void {
    const id = ++this.#nextId;
    this.#waiting.set(id, answer);
    msg.id = id;
    this.#child.stdin.write(`${JSON.stringify(msg)}\n`);
  }

  /** `initialize` and `notifications/initialized`; the server's answer to the first. */
  async initialize(): Promise<Message> {
    const init = await new Promise<Message>((resolve) =>
      this.forward(
        {
          jsonrpc: "2.0",
          method: "initialize",
          params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "floor-relay", version: "1" } },
        } as Message,
        resolve,
      ),
    );
    this.#child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" })}\n`);
    return init;
  }

  close(): void {
    this.#closing = true;
    this.#child.kill();
  }
}

function json(res: http.ServerResponse, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(200, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

async function main(): Promise<void> {
  const shared = perSession ? undefined : new Upstream();
  const sharedInit = await shared?.initialize();
  const bySession = new Map<string, Upstream>();
  let sessions = 0;

  const server = http.createServer((req, res) => {
    const sid = req.headers["mcp-session-id"];
    if (req.method === "DELETE") {
      if (typeof sid === "string") bySession.get(sid)?.close();
      if (typeof sid === "string") bySession.delete(sid);
      return void res.writeHead(200).end();
    }
    if (req.method !== "POST") return void res.writeHead(405).end();
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const msg = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Message;
      if (msg.id === undefined) return void res.writeHead(202).end();
      const clientId = msg.id;
      if (msg.method === "initialize") {
        const id = `s${++sessions}`;
        if (shared) return json(res, { jsonrpc: "2.0", id: clientId, result: sharedInit!.result }, { "mcp-session-id": id });
        const upstream = new Upstream();
        bySession.set(id, upstream);
        return void upstream.initialize().then((init) => json(res, { jsonrpc: "2.0", id: clientId, result: init.result }, { "mcp-session-id": id }));
      }
      const upstream = shared ?? (typeof sid === "string" ? bySession.get(sid) : undefined);
      if (!upstream) return void res.writeHead(404).end();
      upstream.forward(msg, (answer) => {
        answer.id = clientId;
        json(res, answer);
      });
    });
  });
  server.listen(Number(portArg), "127.0.0.1");
}

main().catch((err: unknown) => {
  process.stderr.write(`floor-relay: ${String(err)}\n`);
  process.exit(1);
});
